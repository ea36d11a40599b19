import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { editConfigText, formatOf, parseConfig, type ConfigEdit } from "../../src/configs/index.ts";

const golden = new URL("./golden/", import.meta.url).pathname;

interface GoldenCase {
  name: string;
  input: string;
  expected: string;
  edits: ConfigEdit[];
  file: string;
}

const cases: GoldenCase[] = readdirSync(golden).map((name) => {
  const file = readdirSync(join(golden, name)).find((f) => f.startsWith("input.")) ?? "";
  const ext = file.slice("input.".length);
  return {
    name,
    file,
    input: readFileSync(join(golden, name, file), "utf8"),
    expected: readFileSync(join(golden, name, `expected.${ext}`), "utf8"),
    edits: JSON.parse(readFileSync(join(golden, name, "edits.json"), "utf8")) as ConfigEdit[],
  };
});

function pythonCanCheck(): boolean {
  try {
    execFileSync("python3", ["-c", "import json, tomllib, yaml"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

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

  it.skipIf(!pythonCanCheck())("Python (json, tomllib, PyYAML) reads every edited value as intended", () => {
    const script = String.raw`
import json, sys, tomllib, yaml
cases = json.load(sys.stdin)
out = []
for c in cases:
    text = c["text"]
    data = yaml.safe_load(text) if c["format"] == "yaml" else json.loads(text) if c["format"] == "json" else tomllib.loads(text)
    got = []
    for path in c["paths"]:
        node = data
        for seg in path:
            node = node[int(seg)] if isinstance(node, list) else node[seg]
        got.append(node)
    out.append(got)
json.dump(out, sys.stdout)
`;
    const payload = cases.map((c) => ({
      format: formatOf(c.file),
      text: c.expected,
      paths: c.edits.map((e) => parseConfigKey(e.key)),
    }));
    const result = JSON.parse(execFileSync("python3", ["-c", script], { input: JSON.stringify(payload), encoding: "utf8" })) as unknown[][];
    result.forEach((got, i) => expect(got).toEqual(cases[i]?.edits.map((e) => e.value)));
  });

  it.skipIf(!pythonCanCheck())("Python reads tricky strings back as the same strings, in all three formats", () => {
    const strings = [
      "yes",
      "No",
      "ON",
      "off",
      "y",
      "n",
      "null",
      "Null",
      "~",
      "true",
      "1e3",
      "1e-5",
      "0x10",
      "0o17",
      "017",
      "1:20",
      "1_000",
      "+1",
      ".5",
      "-.inf",
      ".NaN",
      "2001-12-14",
      "2001-12-14t21:59:43.10-05:00",
      "a: b",
      "x #y",
      "- x",
      "=",
      "<<",
      "\u007f",
      "\u0085",
      "\u2028",
      "tab\there",
      "é",
      "\u0000",
      "'",
      '"',
      "\\",
      "%x",
      "@x",
      "`x",
      "!x",
      "&x",
      "*x",
      "|",
      ">",
      "?",
      "? x",
      "[",
      "]",
      "{",
      "}",
      ",",
      "a,b",
      "#",
      "",
      " ",
      " a",
      "a ",
      "\r",
      "\n",
    ];
    const bases = { yaml: "a: 1\nb: 'q'\n", toml: "a = 1\nb = 'q'\n", json: '{"a": 1, "b": "q"}' } as const;
    const payload = (["yaml", "toml", "json"] as const).flatMap((format) =>
      strings.map((value) => ({
        format,
        text: editConfigText(
          parseConfig(bases[format], format, "x"),
          ["a", "b", "c"].map((key) => ({ key, value })),
        ).text,
        paths: [["a"], ["b"], ["c"]],
      })),
    );
    const script = String.raw`
import json, sys, tomllib, yaml
out = []
for c in json.load(sys.stdin):
    t = c["text"]
    d = yaml.safe_load(t) if c["format"] == "yaml" else json.loads(t) if c["format"] == "json" else tomllib.loads(t)
    out.append([d[p[0]] for p in c["paths"]])
json.dump(out, sys.stdout)
`;
    const result = JSON.parse(execFileSync("python3", ["-c", script], { input: JSON.stringify(payload), encoding: "utf8" })) as unknown[][];
    expect(result).toEqual(payload.map((_, i) => Array.from({ length: 3 }, () => strings[i % strings.length])));
  });
});

function parseConfigKey(key: string): string[] {
  return key.match(/"(?:[^"\\]|\\.)*"|[^.]+/g)?.map((s) => (s.startsWith('"') ? (JSON.parse(s) as string) : s)) ?? [];
}
