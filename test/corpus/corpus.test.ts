// The corpus of real public training scripts (corpus/, docs/corpus.md): every pinned file is the one
// corpus.json names (sha256), nothing unlisted sits beside them, each prepare step writes its data in a
// copy of its folder, and `brim run --steps 3` stops the fast subset at exactly 3 steps through the built
// CLI on the real frameworks. The runs need a Python with PyTorch: BRIM_CORPUS_PYTHON, else
// BRIM_BENCH_PYTHON, else the repository's .venv (bash .ci/venv); without one they are skipped, saying why.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

interface Pinned {
  path: string;
  upstream_path: string;
  sha256: string;
}
interface Dir {
  repo: string;
  commit: string;
  licence: string;
  upstream: Pinned[];
  ours: string[];
}
interface Entry {
  name: string;
  dir: string;
  python?: "main" | "extra" | "vision";
  cwd?: string;
  requires?: string[];
  prepare: string[] | null;
  /** modules the prepare step itself needs beyond numpy */
  prepare_requires?: string[];
  env?: Record<string, string>;
  command: string[];
  fast: boolean;
  expect_steps?: number;
}

const REPO = resolve(import.meta.dirname, "..", "..");
const CORPUS = join(REPO, "corpus");
const corpus = JSON.parse(readFileSync(join(CORPUS, "corpus.json"), "utf8")) as { dirs: Record<string, Dir>; entries: Entry[] };
const dirOf = (name: string): Dir => {
  const d = corpus.dirs[name];
  if (d === undefined) throw new Error(`corpus.json names no folder ${name}`);
  return d;
};
const PYTHON = process.env.BRIM_CORPUS_PYTHON ?? process.env.BRIM_BENCH_PYTHON ?? join(REPO, ".venv", "bin", "python");
const hasTorch = existsSync(PYTHON) && spawnSync(PYTHON, ["-c", "import torch"]).status === 0;
const NO_PYTHON = `skipped: no Python with PyTorch at ${PYTHON} (set BRIM_CORPUS_PYTHON)`;
const built = existsSync(join(REPO, "dist", "cli", "main.js"));
const root = mkdtempSync(join(tmpdir(), "brim-corpus-test-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const sha256 = (file: string): string => createHash("sha256").update(readFileSync(file)).digest("hex");
const walk = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => (statSync(join(dir, name)).isDirectory() ? walk(join(dir, name)) : [join(dir, name)]));
const IGNORED = /(^|\/)(__pycache__|data|out|out-[^/]*|lightning_logs|\.brim)(\/|$)|(^|\/)(input\.txt|model\.pt)$/;

/** A fresh copy of an entry's folder, with its prepare step run in it. */
function prepared(entry: Entry): string {
  const work = mkdtempSync(join(root, `${entry.name}-`));
  cpSync(join(CORPUS, entry.dir), work, { recursive: true });
  if (entry.prepare) {
    const r = spawnSync(PYTHON, entry.prepare, { cwd: work, encoding: "utf8", env: { ...process.env, ...entry.env } });
    expect(r.status, `${entry.name} prepare: ${r.stderr.slice(-800)}`).toBe(0);
  }
  return work;
}

describe("corpus.json", () => {
  it("has at least 12 entries, and every entry's folder is pinned by repo and commit with a licence", () => {
    expect(corpus.entries.length).toBeGreaterThanOrEqual(12);
    for (const e of corpus.entries) {
      const d = dirOf(e.dir);
      expect(d.commit).toMatch(/^[0-9a-f]{40}$/);
      expect(d.repo).toMatch(/^[\w.-]+\/[\w.-]+$/);
      expect(d.upstream.some((f) => f.path === "LICENSE")).toBe(true);
    }
  });

  it.each(Object.entries(corpus.dirs))("%s: each pinned file has its recorded sha256, and nothing unlisted sits beside them", (name, dir) => {
    for (const f of dir.upstream) expect(sha256(join(CORPUS, name, f.path)), `${name}/${f.path}`).toBe(f.sha256);
    const listed = new Set([...dir.upstream.map((f) => f.path), ...dir.ours]);
    const present = walk(join(CORPUS, name))
      .map((p) => relative(join(CORPUS, name), p))
      .filter((p) => !IGNORED.test(p));
    expect(present.filter((p) => !listed.has(p))).toEqual([]);
  });

  it("has a fast subset of 3 or 4 entries that need only the base packages", () => {
    const fast = corpus.entries.filter((e) => e.fast);
    expect(fast.length).toBeGreaterThanOrEqual(3);
    expect(fast.length).toBeLessThanOrEqual(4);
    for (const e of fast) expect(e.python ?? "main", e.name).toBe("main");
  });
});

describe.skipIf(!hasTorch)(`prepare steps (${hasTorch ? PYTHON : NO_PYTHON})`, () => {
  // a prepare step that needs a package this Python lacks (PIL, to write JPEG files) runs in the bench's venv only
  const lacks = (e: Entry): boolean =>
    (e.prepare_requires ?? []).length > 0 && spawnSync(PYTHON, ["-c", `import ${(e.prepare_requires ?? []).join(", ")}`]).status !== 0;
  const withPrepare = [...new Map(corpus.entries.filter((e) => e.prepare && !lacks(e)).map((e) => [`${e.dir} ${e.prepare?.join(" ")}`, e])).values()];
  it.each(withPrepare.map((e) => [e.dir, e] as const))(
    "%s: prepare writes its data in a copy of the folder, leaving the pinned files as they were",
    (_dir, entry) => {
      const work = prepared(entry);
      const dir = dirOf(entry.dir);
      for (const f of dir.upstream) expect(sha256(join(work, f.path)), f.path).toBe(f.sha256);
    },
    120_000,
  );
});

describe.skipIf(!hasTorch || !built)(
  `brim run --steps 3 on the fast subset (${!hasTorch ? NO_PYTHON : !built ? "skipped: run npm run build first" : PYTHON})`,
  () => {
    it.each(corpus.entries.filter((e) => e.fast).map((e) => [e.name, e] as const))(
      "%s stops at exactly 3 steps (or at its own end when it has fewer)",
      (_name, entry) => {
        const work = prepared(entry);
        const want = Math.min(3, entry.expect_steps ?? 3);
        const store = join(work, ".brim");
        const r = spawnSync(
          process.execPath,
          [join(REPO, "bin", "brim.js"), "run", "--quiet", "--store", store, "--steps", "3", "--", PYTHON, ...entry.command],
          {
            cwd: join(work, entry.cwd ?? "."),
            encoding: "utf8",
            timeout: 240_000,
            env: { ...process.env, ...entry.env, NO_COLOR: "1" },
          },
        );
        expect(r.status, r.stderr.slice(-1200)).toBe(0);
        const [id = "(no run)"] = readdirSync(join(store, "runs"));
        const meta = JSON.parse(readFileSync(join(store, "runs", id, "run.json"), "utf8")) as { summary: { steps: number } | null };
        expect(meta.summary?.steps).toBe(want);
      },
      300_000,
    );
  },
);

const hasJax = hasTorch && spawnSync(PYTHON, ["-c", "import jax"]).status === 0;
describe.skipIf(!hasJax || !built)(`JAX steps through the attach (${hasJax ? PYTHON : "skipped: no jax beside torch"})`, () => {
  it("jax-mnist-fromscratch, unchanged: brim counts the jitted update's steps (128 samples each) and stops it at exactly 12", () => {
    const entry = corpus.entries.find((e) => e.name === "jax-mnist-fromscratch") as Entry;
    const work = prepared(entry);
    const store = join(work, ".brim");
    const r = spawnSync(
      process.execPath,
      [join(REPO, "bin", "brim.js"), "run", "--quiet", "--store", store, "--steps", "12", "--warmup", "2", "--", PYTHON, ...entry.command],
      { cwd: work, encoding: "utf8", timeout: 240_000, env: { ...process.env, NO_COLOR: "1" } },
    );
    expect(r.status, r.stderr.slice(-1200)).toBe(0);
    const [id = "(no run)"] = readdirSync(join(store, "runs"));
    const meta = JSON.parse(readFileSync(join(store, "runs", id, "run.json"), "utf8")) as { summary: { steps: number } | null };
    expect(meta.summary?.steps).toBe(12);
    const steps = readFileSync(join(store, "runs", id, "timeline.ndjson"), "utf8")
      .split("\n")
      .filter((l) => l.includes('"kind":"step"'))
      .map((l) => JSON.parse(l) as { samples: number | null; source?: string });
    expect(steps).toHaveLength(12);
    // the attach counted them (not the printed lines), each one batch of 128
    for (const s of steps) expect([s.source, s.samples]).toEqual(["attach", 128]);
  }, 300_000);
});

describe.skipIf(!hasTorch || !built)(`brim tune on a public script whose batch size is written in its code (${hasTorch ? PYTHON : NO_PYTHON})`, () => {
  it("pytorch/examples regression, unchanged: get_batch(batch_size=32) becomes the knob, the trials vary it in memory, the pinned file stays as it was", () => {
    const entry = corpus.entries.find((e) => e.name === "regression") as Entry;
    const work = prepared(entry);
    const script = join(work, entry.command[0] as string);
    const before = sha256(script);
    const store = join(work, ".brim");
    const r = spawnSync(
      process.execPath,
      [join(REPO, "bin", "brim.js"), "tune", "--store", store, "--max-trials", "4", "--steps", "10", "--", PYTHON, ...entry.command],
      { cwd: join(work, entry.cwd ?? "."), encoding: "utf8", timeout: 280_000, env: { ...process.env, ...entry.env, NO_COLOR: "1" } },
    );
    expect(r.status, r.stderr.slice(-2000)).toBe(0);
    expect(r.stderr).toMatch(/batch_size=32 is written in the code at main\.py:\d+: trials vary it there, in memory/);
    const [id = "(no tune)"] = readdirSync(join(store, "tunes"));
    const record = JSON.parse(readFileSync(join(store, "tunes", id, "tune.json"), "utf8")) as {
      bindings: { knob: string; via: string }[];
      trials: { knobs: Record<string, unknown>; end: string }[];
    };
    expect(record.bindings.map((b) => `${b.knob}:${b.via}`)).toEqual(["batch_size:code"]);
    const ok = record.trials.filter((t) => t.end === "ok");
    expect(new Set(ok.map((t) => t.knobs.batch_size)).size).toBeGreaterThanOrEqual(2);
    expect(sha256(script)).toBe(before);
  }, 300_000);
});
