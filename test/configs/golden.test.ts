import { describe, expect, it } from "vitest";
import { editConfigText, formatOf, parseConfig } from "../../src/configs/index.ts";
import { cases, parseConfigKey } from "./golden-cases.ts";

// Python reading the edited files back: golden-python.e2e.test.ts
describe("golden config edits", () => {
  it("covers YAML, JSON and TOML", () => {
    expect(new Set(cases.map((c) => formatOf(c.file)))).toEqual(new Set(["yaml", "json", "toml"]));
  });

  it.each(cases)("$name: the output equals expected.* byte for byte", ({ input, expected, edits, file }) => {
    const { text } = editConfigText(parseConfig(input, formatOf(file), file), edits);
    expect(text).toBe(expected);
  });

  it.each(cases)("$name: only lines that hold an edited key change", ({ input, expected, edits }) => {
    const after = new Set(expected.split("\n"));
    const names = edits.flatMap((e) => parseConfigKey(e.key)).filter((name) => !/^\d+$/.test(name));
    // A JSON member that gains a sibling after it gains a comma, nothing else.
    const lost = input.split("\n").filter((line) => !after.has(line) && !after.has(line.replace(/\r?$/, (eol) => `,${eol}`)));
    for (const line of lost)
      expect(
        names.some((name) => line.includes(name)),
        line,
      ).toBe(true);
  });

  it.each(cases)("$name: every edited key reads back with its new value, and a second pass changes nothing", ({ expected, edits, file }) => {
    const doc = parseConfig(expected, formatOf(file), file);
    for (const edit of edits) expect(doc.get(edit.key)).toEqual(edit.value);
    const again = editConfigText(doc, edits);
    expect(again.text).toBe(expected);
    expect(again.changes).toEqual([]);
  });

  it("reports before and after only for keys whose value changed", () => {
    const example = cases.find((c) => c.name === "yaml-example");
    if (example === undefined) throw new Error("missing golden case yaml-example");
    const { changes } = editConfigText(parseConfig(example.input, "yaml", example.file), example.edits);
    expect(changes).toEqual([
      { key: "data_loader.batch_size", before: 32, after: 512 },
      { key: "data_loader.num_workers", before: 0, after: 6 },
      { key: "data_loader.pin_memory", before: false, after: true },
      { key: "data_loader.persistent_workers", before: false, after: true },
      { key: "data_loader.prefetch_factor", before: null, after: 2 },
      { key: "training.precision", before: "fp32", after: "bf16-mixed" },
    ]);
  });
});
