import fc from "fast-check";
import { parse as parseYaml11 } from "yaml";
import { describe, expect, it } from "vitest";
import { editConfigText, formatKeyPath, parseConfig, type ConfigFormat, type ConfigValue } from "../../src/configs/index.ts";
import { getAt, parseKeyPath, setAt } from "../../src/configs/keys.ts";

const BASES: Record<ConfigFormat, string> = {
  yaml: `# base
seed: 0
data_loader:
  batch_size: 16      # note
  num_workers: 0
  pin_memory: false
  prefetch_factor: null
  tag: 'quoted'
  name: "double"
training:
  precision: fp32
  lr: 3.0e-4
  trainer: {accumulate_grad_batches: 1, clip: 1.0}
stages:
  - name: a
    batch_size: 4
  - [1, 2, 3]
empty:
`,
  json: `{
  "seed": 0,
  "data_loader": {"batch_size": 16, "num_workers": 0, "pin_memory": false, "prefetch_factor": null},
  "training": {
    "precision": "fp32",
    "lr": 0.0003,
    "trainer": {"accumulate_grad_batches": 1, "clip": 1.0}
  },
  "stages": [{"name": "a", "batch_size": 4}, [1, 2, 3]],
  "empty": {}
}
`,
  toml: `# base
seed = 0
data_loader = { batch_size = 16, num_workers = 0 }

[training]
precision = "fp32"   # note
lr = 3.0e-4
trainer.accumulate_grad_batches = 1
trainer.clip = 1.0

[[stages]]
name = 'a'
batch_size = 4

[[stages]]
list = [1, 2, 3]

[empty]
`,
};

const EXISTING: Record<ConfigFormat, string[]> = {
  yaml: [
    "seed",
    "data_loader.batch_size",
    "data_loader.num_workers",
    "data_loader.pin_memory",
    "data_loader.prefetch_factor",
    "data_loader.tag",
    "data_loader.name",
    "training.precision",
    "training.lr",
    "training.trainer.accumulate_grad_batches",
    "training.trainer.clip",
    "stages.0.name",
    "stages.0.batch_size",
    "stages.1.2",
    "empty",
  ],
  json: [
    "seed",
    "data_loader.batch_size",
    "data_loader.pin_memory",
    "data_loader.prefetch_factor",
    "training.precision",
    "training.lr",
    "training.trainer.accumulate_grad_batches",
    "stages.0.batch_size",
    "stages.1.0",
  ],
  toml: [
    "seed",
    "data_loader.batch_size",
    "data_loader.num_workers",
    "training.precision",
    "training.lr",
    "training.trainer.accumulate_grad_batches",
    "training.trainer.clip",
    "stages.0.name",
    "stages.0.batch_size",
    "stages.1.list.1",
  ],
};

const PARENTS = ["", "data_loader", "training", "training.trainer", "stages.0", "empty", "new_table", "new_table.deeper"];

const wellFormed = (s: string) => !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
const text = fc
  .oneof(
    fc.string(),
    fc.string({ unit: "binary" }),
    fc.constantFrom(
      "yes",
      "no",
      "on",
      "off",
      "null",
      "~",
      "true",
      "1e3",
      "0x10",
      "1:30",
      "- x",
      "a: b",
      "a #b",
      "",
      " ",
      "'",
      '"',
      "\\",
      "\n",
      "\t",
      "é",
      "[a]",
      "{a}",
      "*a",
      "&a",
      "!a",
      "%a",
      "@a",
      "`a`",
    ),
  )
  .filter(wellFormed);
const scalar = (format: ConfigFormat): fc.Arbitrary<ConfigValue> =>
  fc.oneof(text, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), ...(format === "toml" ? [] : [fc.constant(null)]));
const newName = fc.oneof(
  fc.constantFrom("batch_size", "num_workers", "a.b", "with space", "1x", "ключ"),
  fc.string({ minLength: 1, maxLength: 8 }).filter(wellFormed),
);

function checkEdit(format: ConfigFormat, key: string, given: ConfigValue): void {
  // -0 is written as 0: no config format tells them apart for the programs that read it.
  const value = given === 0 ? 0 : given;
  const base = BASES[format];
  const before = parseConfig(base, format, `p.${format}`);
  const { text: out, changes } = editConfigText(before, [{ key, value: given }]);
  const after = parseConfig(out, format, `p.${format}`);
  expect(after.get(key)).toEqual(value);
  const expected = structuredClone(before.data);
  setAt(expected, parseKeyPath(key), value);
  expect(after.data).toEqual(expected);
  expect(changes.length).toBe(Object.is(before.get(key), value) || before.get(key) === value ? 0 : 1);
  if (format === "yaml") {
    // PyYAML reads YAML 1.1: written strings must not turn into booleans or numbers there.
    expect(getAt(parseYaml11(out, { version: "1.1", merge: true }) as unknown, parseKeyPath(key))).toEqual(value);
  }
}

describe.each(["yaml", "json", "toml"] as const)("editing %s and reading it back", (format) => {
  it("gives the new value at an existing key and keeps every other key", () => {
    fc.assert(
      fc.property(fc.constantFrom(...EXISTING[format]), scalar(format), (key, value) => checkEdit(format, key, value)),
      { numRuns: 300 },
    );
  });

  it("gives the new value at a new key, whatever its name, and keeps every other key", () => {
    fc.assert(
      fc.property(fc.constantFrom(...PARENTS), newName, scalar(format), (parent, name, value) => {
        const key = parent === "" ? formatKeyPath([{ name, index: undefined }]) : `${parent}.${formatKeyPath([{ name, index: undefined }])}`;
        const data = parseConfig(BASES[format], format, "p").data;
        const holder = parent === "" ? data : getAt(data, parseKeyPath(parent));
        fc.pre(getAt(data, parseKeyPath(key)) === undefined && (holder === undefined || (typeof holder === "object" && holder !== null)));
        checkEdit(format, key, value);
      }),
      { numRuns: 300 },
    );
  });
});
