// The corpus manifest (corpus/, docs/corpus.md): training entry points that ship inside PyPI packages,
// with only our own files beside them. Every file under corpus/ is one of ours (nothing unlisted, no
// upstream path, no licence file), and every entry's packages are pinned in its venv's requirements
// file. corpus.e2e.test.ts checks the git tree for other projects' licence headers and runs the quick
// subset through `brim run --steps N`.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { CORPUS, corpus, REPO, type Venv } from "./manifest.ts";

const walk = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => (statSync(join(dir, name)).isDirectory() ? walk(join(dir, name)) : [join(dir, name)]));
// what the generators and the entries write when one is run in place (corpus/.gitignore)
const GENERATED = /(^|\/)(data|out|logs|runs|model|tokenizer|lightning_logs|__pycache__|\.brim)(\/|$)/;
/** name==version lines of a requirements file, keyed by the normalised name. */
const pins = (file: string): Map<string, string> =>
  new Map(
    readFileSync(join(REPO, file), "utf8")
      .split("\n")
      .map((l) => l.replace(/#.*/, "").trim())
      .filter((l) => l !== "")
      .map((l) => l.split("==") as [string, string])
      .map(([n, v]) => [n.toLowerCase().replace(/[-_.]+/g, "-"), v]),
  );
describe("corpus.json names packages, commands and our own files only", () => {
  it("is schema v2, with at least 4 entries in at least 3 packages' entry points", () => {
    expect(corpus.schema).toBe("brim.corpus/v2");
    expect(corpus.entries.length).toBeGreaterThanOrEqual(4);
    expect(new Set(corpus.entries.map((e) => Object.keys(e.packages)[0])).size).toBeGreaterThanOrEqual(3);
  });

  it("lists every file under corpus/ as ours: nothing unlisted, no upstream file, no licence of another project", () => {
    const listed = new Set([...corpus.ours, ...corpus.entries.flatMap((e) => e.files.map((f) => `${e.dir}/${f}`))]);
    const present = walk(CORPUS)
      .map((p) => relative(CORPUS, p))
      .filter((p) => !GENERATED.test(p));
    expect(present.filter((p) => !listed.has(p))).toEqual([]);
    expect([...listed].filter((p) => !existsSync(join(CORPUS, p)))).toEqual([]);
    const json = readFileSync(join(CORPUS, "corpus.json"), "utf8");
    for (const word of ['"upstream"', '"upstream_path"', '"repo"', '"commit"', '"licence"']) expect(json).not.toContain(word);
    expect(present.filter((p) => /(^|\/)(LICEN[CS]E|COPYING|NOTICE)(\.|$)/i.test(p))).toEqual([]);
  });

  it("pins every entry's packages in its venv's requirements file, torch at an exact CPU version", () => {
    for (const e of corpus.entries) {
      const venv = corpus.venvs[e.venv];
      expect(venv, `${e.name}: venv ${e.venv}`).toBeDefined();
      // the venv's main file and the files installed after it with flags of their own (corpus.json's `also`)
      const files = [(venv as Venv).requirements, ...((venv as Venv).also ?? []).map((a) => a.requirements)];
      const pinned = new Map(files.flatMap((f) => [...pins(f)]));
      expect(pinned.get("torch"), `${e.name}: torch in ${(venv as Venv).requirements}`).toMatch(/^2\.(13\.0|14\.1)$/);
      for (const [name, version] of Object.entries(e.packages))
        expect(`${name}==${pinned.get(name.toLowerCase().replace(/[-_.]+/g, "-")) ?? "(not pinned)"}`, `${e.name} in ${files.join(" + ")}`).toBe(
          `${name}==${version}`,
        );
      // the command's files of ours are listed and present; a key=value word may name a file of the
      // package instead (ultralytics' model=yolov8n-cls.yaml), which is not in the entry's folder
      for (const arg of [...e.command, ...(e.prepare ?? [])].filter((a) => /\.(py|ya?ml|json|toml)$/.test(a))) {
        const file = arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : arg;
        if (arg.includes("=") && !existsSync(join(CORPUS, e.dir, file))) continue;
        expect(e.files, `${e.name}: ${arg}`).toContain(file);
      }
    }
  });

  it("has a quick subset on the project's own venv (what CI runs)", () => {
    const fast = corpus.entries.filter((e) => e.fast);
    expect(fast.length).toBeGreaterThanOrEqual(1);
    for (const e of fast) expect(e.venv, e.name).toBe("main");
  });
});
