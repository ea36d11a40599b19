import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

// The house rules of issue 25, held: no file in src/ over 500 lines but data tables and FFI structs,
// no function over 120 lines (scripts/function-lengths.mjs reads the TypeScript AST).
const REPO = resolve(import.meta.dirname, "..", "..");
const DATA = new Set(["src/devices/nvml-structs.ts", "src/plan/catalog.ts"]);

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith(".ts") ? [path] : [];
  });
}

describe("the size of src/", () => {
  it("no file over 500 lines, data tables and FFI structs aside", () => {
    const long = files(join(REPO, "src"))
      .map((path) => ({ file: relative(REPO, path), lines: readFileSync(path, "utf8").split("\n").length }))
      .filter((f) => f.lines > 500 && !DATA.has(f.file));
    expect(long).toEqual([]);
  });

  it("no function over 120 lines", () => {
    const result = spawnSync(process.execPath, [join(REPO, "scripts/function-lengths.mjs"), "--max", "120"], { encoding: "utf8" });
    expect(result.status, result.stdout + result.stderr).toBe(0);
  });
});
