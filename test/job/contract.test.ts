// The environment contract between brim and the job has one home (src/job/contract.ts): every BRIM_*
// name that src/ or the Python package uses is in it, and docs/sdk.md's table lists exactly the job's.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { BRIM_ENV, JOB_ENV } from "../../src/job/contract.ts";
import { OFF_WORDS } from "../../src/job/environment.ts";

const REPO = resolve(import.meta.dirname, "..", "..");

function files(dir: string, ext: RegExp): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === "__pycache__" || name === "tests" || name === "node_modules") return [];
    return statSync(path).isDirectory() ? files(path, ext) : ext.test(name) ? [path] : [];
  });
}
const namesIn = (paths: string[]): Map<string, string> => {
  const found = new Map<string, string>();
  for (const path of paths) for (const m of readFileSync(path, "utf8").matchAll(/\bBRIM_[A-Z0-9_]*[A-Z0-9]\b/g)) if (!found.has(m[0])) found.set(m[0], path);
  return found;
};

describe("the job's environment contract", () => {
  it("every BRIM_* name the Python package reads is in JOB_ENV", () => {
    const python = namesIn([...files(join(REPO, "python", "brim"), /\.py$/), ...files(join(REPO, "python", "_brim_boot"), /\.py$/)]);
    const unknown = [...python].filter(([name]) => !(name in JOB_ENV)).map(([name, path]) => `${name} (${path})`);
    expect(unknown).toEqual([]);
    expect(python.size).toBeGreaterThan(10);
  });

  it("every BRIM_* name in src/ is in JOB_ENV or BRIM_ENV, and each table's names are used", () => {
    const src = namesIn(files(join(REPO, "src"), /\.ts$/).filter((p) => !p.endsWith("contract.ts")));
    const unknown = [...src].filter(([name]) => !(name in JOB_ENV) && !(name in BRIM_ENV)).map(([name, path]) => `${name} (${path})`);
    expect(unknown).toEqual([]);
    const anywhere = namesIn([
      ...files(join(REPO, "src"), /\.ts$/).filter((p) => !p.endsWith("contract.ts")),
      ...files(join(REPO, "python"), /\.py$/),
      join(REPO, "scripts", "sea.mjs"),
    ]);
    const unused = [...Object.keys(JOB_ENV), ...Object.keys(BRIM_ENV)].filter((name) => !anywhere.has(name));
    expect(unused).toEqual([]);
  });

  it("only python/brim/_env.py reads brim's variables and the launcher's; the start-up, which must not import brim first, says the same off-words", () => {
    const readers = [...files(join(REPO, "python", "brim"), /\.py$/)].filter(
      (path) => !path.endsWith("_env.py") && /environ(?:\.get)?\(\s*["']BRIM_|getenv\(\s*["']BRIM_|=\s*["']BRIM_[A-Z_]+["']/.test(readFileSync(path, "utf8")),
    );
    expect(readers).toEqual([]);
    // the launcher's variables (RANK, LOCAL_RANK, ...) too: no module but _env.py touches the environment
    const touching = [...files(join(REPO, "python", "brim"), /\.py$/)].filter(
      (path) => !path.endsWith("_env.py") && /\bos\.(environ|getenv)\b/.test(readFileSync(path, "utf8")),
    );
    expect(touching).toEqual([]);
    const words = (text: string | undefined): string[] => [...(text ?? "").matchAll(/"([a-z0-9]+)"/g)].map((m) => m[1] as string).sort();
    const env = readFileSync(join(REPO, "python", "brim", "_env.py"), "utf8");
    const boot = readFileSync(join(REPO, "python", "_brim_boot", "sitecustomize.py"), "utf8");
    const ours = [...OFF_WORDS].sort();
    expect(words(/OFF_WORDS[^=]*= frozenset\(\(([^)]*)\)\)/.exec(env)?.[1])).toEqual(ours);
    expect(words(/BRIM_ATTACH", "1"\)\.strip\(\)\.lower\(\) in \(([^)]*)\)/.exec(boot)?.[1])).toEqual(ours);
  });

  it("docs/sdk.md's environment table lists exactly the job's variables", () => {
    const doc = readFileSync(join(REPO, "docs", "sdk.md"), "utf8");
    const section = doc.slice(doc.indexOf("## Environment variables"));
    const table = section.slice(0, section.indexOf("\n## ") > 0 ? section.indexOf("\n## ") : undefined);
    const rows = [...table.matchAll(/^\| `(BRIM_[A-Z0-9_]+)` \|/gm)].map((m) => m[1]);
    expect([...rows].sort()).toEqual(Object.keys(JOB_ENV).sort());
  });
});
