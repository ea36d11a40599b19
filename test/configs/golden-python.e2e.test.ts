import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { editConfigText, formatOf, parseConfig } from "../../src/configs/index.ts";
import { cases, parseConfigKey } from "./golden-cases.ts";

// The golden edits read back by Python's own parsers (json, tomllib, PyYAML): real processes.
function pythonCanCheck(): boolean {
  try {
    execFileSync("python3", ["-c", "import json, tomllib, yaml"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

describe("golden config edits, read by Python", () => {
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
