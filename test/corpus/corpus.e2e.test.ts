// The corpus (corpus/, docs/corpus.md), through real processes: no file in the git tree is another
// project's licence or carries its licence or copyright header (corpus.test.ts checks the manifest). The
// run test puts the quick subset (entries on the project's .venv) through `brim run --steps N`
// on the real package and checks it stops at exactly N. The Python is BRIM_CORPUS_PYTHON, else the
// repository's .venv (bash .ci/venv); an entry whose packages it lacks is skipped, saying which.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";
import { CORPUS, corpus, type Entry, REPO } from "./manifest.ts";

const root = mkdtempSync(join(tmpdir(), "brim-corpus-test-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const tracked = spawnSync("git", ["ls-files", "-z"], { cwd: REPO, encoding: "utf8" })
  .stdout.split("\0")
  .filter((f) => f !== "" && existsSync(join(REPO, f)));
// the phrases other projects' licence headers open with, written in pieces so this file holds none of them
const HEADERS = [
  ["SPDX-License", "-Identifier"],
  ["Copyright (c", ")"],
  ["Licensed under the Apache", " License"],
  ["Permission is hereby granted,", " free of charge"],
  ["Redistribution and use in source and binary", " forms"],
  ["GNU General Public", " License"],
  ["THE SOFTWARE IS PROVIDED", ' "AS IS"'],
].map(([a, b]) => `${a}${b}`);

describe("the git tree", () => {
  it("holds no licence file and no licence or copyright header of another project anywhere in the git tree", () => {
    expect(tracked.length).toBeGreaterThan(100);
    expect(tracked.filter((f) => /^(LICEN[CS]E|COPYING|NOTICE)(\.|$)/i.test(basename(f)) && f.includes("/"))).toEqual([]);
    const carrying = tracked.filter((f) => {
      const text = readFileSync(join(REPO, f)).subarray(0, 100_000).toString("latin1");
      return HEADERS.some((h) => text.includes(h));
    });
    expect(carrying).toEqual([]);
  });
});

const PYTHON = process.env.BRIM_CORPUS_PYTHON ?? join(REPO, ".venv", "bin", "python");
const built = existsSync(join(REPO, "dist", "cli", "main.js"));
/** What the Python lacks of an entry's packages, or null. */
function lacks(entry: Entry): string | null {
  if (!existsSync(PYTHON)) return `no Python at ${PYTHON} (set BRIM_CORPUS_PYTHON)`;
  const names = Object.keys(entry.packages);
  const r = spawnSync(
    PYTHON,
    ["-c", "import importlib.metadata as m, sys\nfor n in sys.argv[1:]:\n  try: print(n, m.version(n))\n  except Exception: print(n, '-')", ...names],
    {
      encoding: "utf8",
    },
  );
  const wrong = r.stdout
    .trim()
    .split("\n")
    .map((l) => l.split(" "))
    .filter(([n, v]) => entry.packages[n as string] !== v)
    .map(([n, v]) => `${n as string} ${v === "-" ? "missing" : `${v as string} (pinned ${entry.packages[n as string] as string})`}`);
  return wrong.length ? `${PYTHON}: ${wrong.join(", ")}` : null;
}

// CI sets BRIM_REQUIRE_FRAMEWORKS=1: there a Python without the quick subset's pinned packages is a failure, not a skip
const required = process.env.BRIM_REQUIRE_FRAMEWORKS === "1";
describe.skipIf(!built)(`brim run --steps N on the quick subset, through the real packages (${built ? PYTHON : "skipped: run npm run build first"})`, () => {
  for (const entry of corpus.entries.filter((e) => e.fast)) {
    const missing = lacks(entry);
    if (missing !== null && required) throw new Error(`BRIM_REQUIRE_FRAMEWORKS=1 but ${missing}`);
    it.skipIf(missing !== null)(
      `${entry.name} stops at exactly ${entry.run_steps} steps${missing ? ` (skipped: ${missing})` : ""}`,
      () => {
        const work = mkdtempSync(join(root, `${entry.name}-`));
        cpSync(join(CORPUS, entry.dir), work, { recursive: true });
        const env = { ...process.env, ...entry.env, NO_COLOR: "1" };
        if (entry.prepare) {
          const p = spawnSync(PYTHON, entry.prepare, { cwd: work, encoding: "utf8", env });
          expect(p.status, `${entry.name} prepare: ${p.stderr.slice(-800)}`).toBe(0);
        }
        const store = join(work, ".brim");
        const program = entry.executable ? [join(PYTHON, "..", entry.executable)] : [PYTHON];
        const r = spawnSync(
          process.execPath,
          [join(REPO, "bin", "brim.js"), "run", "--quiet", "--store", store, "--steps", String(entry.run_steps), "--", ...program, ...entry.command],
          { cwd: work, encoding: "utf8", timeout: scaled(240_000), env },
        );
        expect(r.status, r.stderr.slice(-1500)).toBe(0);
        const [id = "(no run)"] = readdirSync(join(store, "runs"));
        const meta = JSON.parse(readFileSync(join(store, "runs", id, "run.json"), "utf8")) as { summary: { steps: number; throughput_source: string } | null };
        expect(meta.summary?.steps).toBe(entry.run_steps);
        // counted inside the job by the attach, not read from its printed lines
        expect(meta.summary?.throughput_source).toBe("attach");
      },
      300_000,
    );
  }
});
