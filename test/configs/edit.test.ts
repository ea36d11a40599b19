import { describe, expect, it } from "vitest";
import { BrimError, InputError } from "../../src/errors/index.ts";
import { editConfigText, formatOf, parseConfig, type ConfigEdit, type ConfigFormat } from "../../src/configs/index.ts";

function edit(text: string, format: ConfigFormat, edits: ConfigEdit[]): string {
  return editConfigText(parseConfig(text, format, `c.${format}`), edits).text;
}

function failure(run: () => unknown): BrimError {
  try {
    run();
  } catch (error) {
    if (error instanceof BrimError) return error;
    throw error;
  }
  throw new Error("expected a BrimError");
}

interface FormatCase {
  format: ConfigFormat;
  text: string;
  setExisting: string;
  createMissing: string;
  listIndex: string;
  quotedDot: string;
  badSyntax: { text: string; at: string };
  mapping: string;
}

const FORMATS: FormatCase[] = [
  {
    format: "yaml",
    text: '# config\nseed: 0\ndata_loader:\n  batch_size: 16   # note\nstages:\n  - batch_size: 4\n  - batch_size: 8\n"lr.scale":\n  value: 1\n',
    setExisting: '# config\nseed: 0\ndata_loader:\n  batch_size: 128  # note\nstages:\n  - batch_size: 4\n  - batch_size: 8\n"lr.scale":\n  value: 1\n',
    createMissing:
      '# config\nseed: 0\ndata_loader:\n  batch_size: 16   # note\n  num_workers: 4\nstages:\n  - batch_size: 4\n  - batch_size: 8\n"lr.scale":\n  value: 1\n',
    listIndex: '# config\nseed: 0\ndata_loader:\n  batch_size: 16   # note\nstages:\n  - batch_size: 4\n  - batch_size: 32\n"lr.scale":\n  value: 1\n',
    quotedDot: '# config\nseed: 0\ndata_loader:\n  batch_size: 16   # note\nstages:\n  - batch_size: 4\n  - batch_size: 8\n"lr.scale":\n  value: 2.5\n',
    badSyntax: { text: "a: 1\nb: [1, 2\nc: 3\n", at: "c.yaml:3:" },
    mapping: "mapping",
  },
  {
    format: "json",
    text: '{\n  "seed": 0,\n  "data_loader": {\n    "batch_size": 16\n  },\n  "stages": [{"batch_size": 4}, {"batch_size": 8}],\n  "lr.scale": {"value": 1}\n}\n',
    setExisting:
      '{\n  "seed": 0,\n  "data_loader": {\n    "batch_size": 128\n  },\n  "stages": [{"batch_size": 4}, {"batch_size": 8}],\n  "lr.scale": {"value": 1}\n}\n',
    createMissing:
      '{\n  "seed": 0,\n  "data_loader": {\n    "batch_size": 16,\n    "num_workers": 4\n  },\n  "stages": [{"batch_size": 4}, {"batch_size": 8}],\n  "lr.scale": {"value": 1}\n}\n',
    listIndex:
      '{\n  "seed": 0,\n  "data_loader": {\n    "batch_size": 16\n  },\n  "stages": [{"batch_size": 4}, {"batch_size": 32}],\n  "lr.scale": {"value": 1}\n}\n',
    quotedDot:
      '{\n  "seed": 0,\n  "data_loader": {\n    "batch_size": 16\n  },\n  "stages": [{"batch_size": 4}, {"batch_size": 8}],\n  "lr.scale": {"value": 2.5}\n}\n',
    badSyntax: { text: '{\n  "a": 1,\n  "b": 2,\n}\n', at: "c.json:4:1:" },
    mapping: "object",
  },
  {
    format: "toml",
    text: 'seed = 0\n\n[data_loader]\nbatch_size = 16   # note\n\n[[stages]]\nbatch_size = 4\n\n[[stages]]\nbatch_size = 8\n\n["lr.scale"]\nvalue = 1.0\n',
    setExisting:
      'seed = 0\n\n[data_loader]\nbatch_size = 128  # note\n\n[[stages]]\nbatch_size = 4\n\n[[stages]]\nbatch_size = 8\n\n["lr.scale"]\nvalue = 1.0\n',
    createMissing:
      'seed = 0\n\n[data_loader]\nbatch_size = 16   # note\nnum_workers = 4\n\n[[stages]]\nbatch_size = 4\n\n[[stages]]\nbatch_size = 8\n\n["lr.scale"]\nvalue = 1.0\n',
    listIndex:
      'seed = 0\n\n[data_loader]\nbatch_size = 16   # note\n\n[[stages]]\nbatch_size = 4\n\n[[stages]]\nbatch_size = 32\n\n["lr.scale"]\nvalue = 1.0\n',
    quotedDot: 'seed = 0\n\n[data_loader]\nbatch_size = 16   # note\n\n[[stages]]\nbatch_size = 4\n\n[[stages]]\nbatch_size = 8\n\n["lr.scale"]\nvalue = 2.5\n',
    badSyntax: { text: "a = 1\n[b]\nc = 1 2\n", at: "c.toml:3:7:" },
    mapping: "table",
  },
];

describe.each(FORMATS)("$format", (c) => {
  it("sets an existing key, keeping the comment's column", () => {
    expect(edit(c.text, c.format, [{ key: "data_loader.batch_size", value: 128 }])).toBe(c.setExisting);
  });

  it("creates a missing key at the end of its mapping", () => {
    expect(edit(c.text, c.format, [{ key: "data_loader.num_workers", value: 4 }])).toBe(c.createMissing);
  });

  it("indexes a list with a numeric segment", () => {
    expect(edit(c.text, c.format, [{ key: "stages.1.batch_size", value: 32 }])).toBe(c.listIndex);
  });

  it("reads a quoted segment with a dot in it as one key", () => {
    expect(edit(c.text, c.format, [{ key: '"lr.scale".value', value: 2.5 }])).toBe(c.quotedDot);
  });

  it("lists only the keys whose value differs", () => {
    const doc = parseConfig(c.text, c.format, `c.${c.format}`);
    const { text, changes } = editConfigText(doc, [
      { key: "data_loader.batch_size", value: 16 },
      { key: "seed", value: 7 },
      { key: "stages.0.batch_size", value: 5 },
      { key: "stages.0.batch_size", value: 4 },
    ]);
    expect(changes).toEqual([{ key: "seed", before: 0, after: 7 }]);
    expect(parseConfig(text, c.format, "x").data).toEqual({ ...(doc.data as object), seed: 7 });
  });

  it("gets values by key and undefined for absent ones", () => {
    const doc = parseConfig(c.text, c.format, `c.${c.format}`);
    expect(doc.get("data_loader.batch_size")).toBe(16);
    expect(doc.get("stages.1.batch_size")).toBe(8);
    expect(doc.get('"lr.scale".value')).toBe(1);
    expect(doc.get("data_loader.nope")).toBeUndefined();
    expect(doc.get("stages.9.batch_size")).toBeUndefined();
    expect(doc.get("seed.deeper")).toBeUndefined();
    expect(doc.sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it("fails on bad syntax with E_PARSE and line:col", () => {
    const error = failure(() => parseConfig(c.badSyntax.text, c.format, `c.${c.format}`));
    expect(error.code).toBe("E_PARSE");
    expect(error.message.startsWith(c.badSyntax.at)).toBe(true);
    expect(error.message).toContain(`not valid ${c.format.toUpperCase()}`);
  });

  it("refuses a parent that is not a mapping, naming the key", () => {
    const error = failure(() => edit(c.text, c.format, [{ key: "seed.x", value: 1 }]));
    expect(error).toBeInstanceOf(InputError);
    expect(error.message).toBe(`c.${c.format}: seed.x: seed holds 0, not a ${c.mapping}`);
  });

  it("refuses to replace a mapping or a list by a single value", () => {
    expect(failure(() => edit(c.text, c.format, [{ key: "data_loader", value: 1 }])).message).toMatch(/data_loader: holds a \w+; brim only sets single values/);
    expect(failure(() => edit(c.text, c.format, [{ key: "stages", value: 1 }])).message).toMatch(/stages: holds a/);
  });

  it("refuses a list index out of range or a name on a list", () => {
    expect(failure(() => edit(c.text, c.format, [{ key: "stages.2.batch_size", value: 1 }])).message).toContain("index 2 is out of range: stages has 2 items");
    expect(failure(() => edit(c.text, c.format, [{ key: "stages.first.batch_size", value: 1 }])).message).toContain('index it with a number, not "first"');
  });

  it("refuses malformed keys and values", () => {
    for (const key of ["", "a..b", ".a", "a.", '"a', 'a"b', '"a"b'])
      expect(failure(() => edit(c.text, c.format, [{ key, value: 1 }]))).toBeInstanceOf(InputError);
    for (const value of [Number.NaN, Number.POSITIVE_INFINITY, {} as never, [] as never, undefined as never, "\ud800"]) {
      expect(failure(() => edit(c.text, c.format, [{ key: "seed", value }]))).toBeInstanceOf(InputError);
    }
  });

  it("creates missing mappings on the way to a new key", () => {
    const text = edit(c.text, c.format, [{ key: "training.trainer.accumulate_grad_batches", value: 8 }]);
    const doc = parseConfig(text, c.format, "x");
    expect(doc.get("training.trainer.accumulate_grad_batches")).toBe(8);
    expect(text.startsWith(c.text.trimEnd().slice(0, -2))).toBe(true);
  });

  it("writes strings that need quoting or escaping so they read back exactly", () => {
    const values = [
      "yes",
      "no",
      "on",
      "null",
      "true",
      "1e3",
      "0x1F",
      "1:20",
      "a: b",
      "x #y",
      "#z",
      "",
      " pad ",
      'quote"d',
      "it's",
      "back\\slash",
      "tab\there",
      "line\nbreak",
      "ünïcödé ✓",
      "- item",
      "[x]",
      "{y}",
      "*ref",
      "&anchor",
      "!tag",
      "%p",
      "@at",
      "`tick`",
      "~",
      "=",
      "a,b",
    ];
    for (const value of values) {
      const text = edit(c.text, c.format, [
        { key: "data_loader.batch_size", value },
        { key: "data_loader.new_key", value },
      ]);
      const doc = parseConfig(text, c.format, "x");
      expect(doc.get("data_loader.batch_size"), text).toBe(value);
      expect(doc.get("data_loader.new_key"), text).toBe(value);
    }
  });

  it("creates keys whose names need quoting", () => {
    for (const name of ["has space", "has.dot", "1", "yes", "colon: here", "ünï", 'q"uote', "#hash", "-dash"]) {
      const key = `data_loader.${JSON.stringify(name)}`;
      const text = edit(c.text, c.format, [{ key, value: 3 }]);
      expect(parseConfig(text, c.format, "x").get(key), text).toBe(3);
    }
  });

  it("keeps a byte order mark and CRLF line ends", () => {
    const crlf = `\ufeff${c.text.replaceAll("\n", "\r\n")}`;
    const text = edit(crlf, c.format, [
      { key: "data_loader.num_workers", value: 4 },
      { key: "data_loader.batch_size", value: 128 },
    ]);
    expect(text).toBe(
      `\ufeff${c.createMissing.replace("batch_size: 16   #", "batch_size: 128  #").replace('"batch_size": 16,', '"batch_size": 128,').replace("batch_size = 16   #", "batch_size = 128  #").replaceAll("\n", "\r\n")}`,
    );
  });
});

describe("formatOf", () => {
  it("tells the format by extension, in any case", () => {
    expect(["a.yaml", "b.YML", "c/d.json", "e.Toml"].map(formatOf)).toEqual(["yaml", "yaml", "json", "toml"]);
  });

  it("refuses other extensions with an InputError naming the file", () => {
    expect(() => formatOf("train.ini")).toThrow(/train\.ini: brim edits \.yaml, \.yml, \.json and \.toml config files, not \.ini/);
    expect(() => formatOf("Makefile")).toThrow(InputError);
  });
});

describe("YAML specifics", () => {
  const yaml = (text: string, edits: ConfigEdit[]) => edit(text, "yaml", edits);

  it("keeps single and double quotes of an existing string, and plain where it was plain", () => {
    const text = "a: 'x'\nb: \"y\"\nc: z\n";
    expect(
      yaml(text, [
        { key: "a", value: "it's" },
        { key: "b", value: "v" },
        { key: "c", value: "w" },
      ]),
    ).toBe("a: 'it''s'\nb: \"v\"\nc: w\n");
    expect(yaml(text, [{ key: "a", value: "two\nlines" }])).toBe('a: "two\\nlines"\nb: "y"\nc: z\n');
  });

  it("writes numbers in exponent form with a dot, so PyYAML reads a float", () => {
    expect(yaml("lr: 0.1\n", [{ key: "lr", value: 1e-7 }])).toBe("lr: 1.0e-7\n");
    expect(yaml("lr: 0.1\n", [{ key: "lr", value: 1e21 }])).toBe("lr: 1.0e+21\n");
    expect(yaml("lr: 0.1\n", [{ key: "lr", value: 2.5e-7 }])).toBe("lr: 2.5e-7\n");
  });

  it("fills an empty value, before a comment too", () => {
    expect(yaml("a:\nb: 1\n", [{ key: "a", value: 2 }])).toBe("a: 2\nb: 1\n");
    expect(yaml("a:   # none yet\nb: 1\n", [{ key: "a", value: 2 }])).toBe("a:   2 # none yet\nb: 1\n");
  });

  it("replaces a block scalar with a one-line scalar", () => {
    expect(yaml("note: |\n  one\n  two\nnext: 1\n", [{ key: "note", value: "three" }])).toBe("note: three\nnext: 1\n");
  });

  it("adds keys to an empty document, a comments-only one and a bare ---", () => {
    expect(yaml("", [{ key: "a.b", value: 1 }])).toBe("a:\n  b: 1\n");
    expect(yaml("# only a comment", [{ key: "a", value: 1 }])).toBe("# only a comment\na: 1\n");
    expect(yaml("---\n", [{ key: "a", value: true }])).toBe("---\na: true\n");
  });

  it("follows the file's indentation step for new nested mappings", () => {
    expect(yaml("a:\n    b: 1\n", [{ key: "a.c.d", value: 2 }])).toBe("a:\n    b: 1\n    c:\n        d: 2\n");
  });

  it("adds to flow mappings in flow style, quoting flow indicators", () => {
    expect(
      yaml("dl: {bs: 8}\ne: {}\n", [
        { key: "dl.tag", value: "a,b" },
        { key: "e.f.g", value: 1 },
      ]),
    ).toBe('dl: {bs: 8, tag: "a,b"}\ne: {f: {g: 1}}\n');
    expect(yaml("xs: [a, b]\n", [{ key: "xs.1", value: "c d" }])).toBe("xs: [a, c d]\n");
  });

  it("sets a key the mapping has only through a merge key as its own override", () => {
    const text = "base: &b\n  lr: 1\nrun:\n  <<: *b\n  bs: 2\n";
    const out = yaml(text, [{ key: "run.lr", value: 5 }]);
    expect(out).toBe("base: &b\n  lr: 1\nrun:\n  <<: *b\n  bs: 2\n  lr: 5\n");
    expect(parseConfig(out, "yaml", "x").get("base.lr")).toBe(1);
  });

  it("refuses to edit through an alias or inside an anchor that aliases reuse", () => {
    const text = "base: &b\n  lr: 1\nrun: *b\nv: &n 3\nw: *n\n";
    expect(failure(() => yaml(text, [{ key: "run.lr", value: 2 }])).message).toContain("run is the alias *b");
    expect(failure(() => yaml(text, [{ key: "base.lr", value: 2 }])).message).toContain("base has the anchor &b");
    expect(failure(() => yaml(text, [{ key: "v", value: 4 }])).message).toContain("v has the anchor &n");
    expect(yaml(text, [{ key: "w", value: 4 }])).toBe("base: &b\n  lr: 1\nrun: *b\nv: &n 3\nw: 4\n");
  });

  it("refuses an edit that would not read back as meant", () => {
    expect(failure(() => yaml("n: !!str 7\n", [{ key: "n", value: 8 }])).message).toContain("cannot be set safely");
  });

  it("refuses a file with several documents", () => {
    const error = failure(() => parseConfig("a: 1\n---\nb: 2\n", "yaml", "c.yaml"));
    expect(error.code).toBe("E_PARSE");
    expect(error.message).toMatch(/^c\.yaml:2:1: not valid YAML: Source contains multiple documents/);
  });
});

describe("JSON specifics", () => {
  const json = (text: string, edits: ConfigEdit[]) => edit(text, "json", edits);

  it("adds to compact and minified objects in their own spacing", () => {
    expect(
      json('{"a":{"b":1,"c":2}}', [
        { key: "a.d", value: true },
        { key: "e.f", value: null },
      ]),
    ).toBe('{"a":{"b":1,"c":2,"d":true},"e":{"f":null}}');
    expect(json('{"a": {}}\n', [{ key: "a.b", value: 1 }])).toBe('{"a": {"b": 1}}\n');
  });

  it("opens an empty object onto new lines in an indented file", () => {
    expect(json('{\n\t"a": {},\n\t"b": 1\n}\n', [{ key: "a.x.y", value: 1 }])).toBe('{\n\t"a": {\n\t\t"x": {\n\t\t\t"y": 1\n\t\t}\n\t},\n\t"b": 1\n}\n');
  });

  it("edits the last of duplicate keys, the one JSON readers keep", () => {
    expect(json('{"a": 1, "a": 2}', [{ key: "a", value: 3 }])).toBe('{"a": 1, "a": 3}');
  });

  it("points at the bad character", () => {
    expect(failure(() => parseConfig('{"a": tru}', "json", "c.json")).message).toBe('c.json:1:7: not valid JSON: unexpected "t"');
    expect(failure(() => parseConfig('{"a": 1} x', "json", "c.json")).message).toBe(
      "c.json:1:10: not valid JSON: unexpected text after the end of the JSON value",
    );
    expect(failure(() => parseConfig('{"a": "\u0001"}', "json", "c.json")).message).toContain("c.json:1:8:");
    expect(failure(() => parseConfig("", "json", "c.json")).message).toBe("c.json:1:1: not valid JSON: unexpected end of the file");
    expect(failure(() => parseConfig("// comment\n{}", "json", "c.json")).code).toBe("E_PARSE");
  });
});

describe("TOML specifics", () => {
  const toml = (text: string, edits: ConfigEdit[]) => edit(text, "toml", edits);

  it("refuses null, which TOML does not have", () => {
    expect(failure(() => toml("a = 1\n", [{ key: "a", value: null }])).message).toBe("c.toml: a: TOML has no null; remove the key by hand, or give it a value");
  });

  it("keeps a float a float and a literal string literal where it can", () => {
    expect(
      toml("f = 1.5\ns = 'x'\n", [
        { key: "f", value: 2 },
        { key: "s", value: "C:\\dir" },
      ]),
    ).toBe("f = 2.0\ns = 'C:\\dir'\n");
    expect(toml("s = 'x'\n", [{ key: "s", value: "it's" }])).toBe('s = "it\'s"\n');
  });

  it("creates a table at the end of the file, a dotted key where the table is dotted", () => {
    expect(toml("a = 1\n", [{ key: "t.u.v", value: 2 }])).toBe("a = 1\n\n[t.u]\nv = 2\n");
    expect(toml("a = 1", [{ key: "t.v", value: 2 }])).toBe("a = 1\n\n[t]\nv = 2\n");
    expect(toml("a.b = 1\nz = 0\n", [{ key: "a.c", value: 2 }])).toBe("a.b = 1\na.c = 2\nz = 0\n");
    expect(toml("[t]\nx = 1\n", [{ key: "t.u.v", value: 2 }])).toBe("[t]\nx = 1\nu.v = 2\n");
  });

  it("adds a root key above the first table and its comments", () => {
    expect(toml("# header\n\n# about t\n[t]\nx = 1\n", [{ key: "seed", value: 1 }])).toBe("# header\n\nseed = 1\n\n# about t\n[t]\nx = 1\n");
  });

  it("adds to empty tables and inline tables", () => {
    expect(toml("[t]\n[u]\n", [{ key: "t.x", value: 1 }])).toBe("[t]\nx = 1\n[u]\n");
    expect(toml("t = {}\n", [{ key: "t.x", value: 1 }])).toBe("t = { x = 1 }\n");
    expect(
      toml("arr = [{ x = 1 }, { x = 2 }]\n", [
        { key: "arr.1.x", value: 3 },
        { key: "arr.0.y", value: 4 },
      ]),
    ).toBe("arr = [{ x = 1, y = 4 }, { x = 3 }]\n");
  });

  it("refuses to replace an inline table or an array", () => {
    expect(failure(() => toml("t = { x = 1 }\n", [{ key: "t", value: 1 }])).message).toContain("t: holds a table");
  });
});
