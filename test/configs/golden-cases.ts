// The golden config-edit cases of test/configs/golden/<case>/ (input, edits.json, expected), read once.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ConfigEdit } from "../../src/configs/index.ts";

const golden = new URL("./golden/", import.meta.url).pathname;

export interface GoldenCase {
  name: string;
  input: string;
  expected: string;
  edits: ConfigEdit[];
  file: string;
}

export const cases: GoldenCase[] = readdirSync(golden).map((name) => {
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

/** A dotted config key as its segments ("a.\"b.c\".0" → a, b.c, 0). */
export function parseConfigKey(key: string): string[] {
  return key.match(/"(?:[^"\\]|\\.)*"|[^.]+/g)?.map((s) => (s.startsWith('"') ? (JSON.parse(s) as string) : s)) ?? [];
}
