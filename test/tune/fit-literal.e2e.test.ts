import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

// A batch size that is only a literal in the code, passed to a framework-style call
// (`model.fit(x, y, batch_size=batch_size)`, test/jobs/fit_literal.py) rather than to a DataLoader:
// `brim plan` and `brim tune` find the same line (one finder for both) and vary it in memory.
const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? join(REPO, ".venv", "bin", "python");
// found, not imported: an import of torch is seconds of CPU, and the trials import it anyway
const hasTorch =
  existsSync(PYTHON) && spawnSync(PYTHON, ["-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"]).status === 0;
const built = existsSync(join(REPO, "dist", "cli", "main.js"));
const root = mkdtempSync(join(tmpdir(), "brim-fit-literal-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const brim = (...args: string[]) =>
  spawnSync(process.execPath, [join(REPO, "bin", "brim.js"), ...args], {
    cwd: root,
    encoding: "utf8",
    timeout: scaled(300_000),
    env: { ...process.env, NO_COLOR: "1" },
  });

describe.skipIf(!hasTorch || !built)("a batch size written as a literal and handed to model.fit", () => {
  cpSync(join(REPO, "test", "jobs", "fit_literal.py"), join(root, "fit_literal.py"));
  const before = readFileSync(join(root, "fit_literal.py"), "utf8");

  it(
    "brim tune finds fit_literal.py:30 and its trials vary it there, the file untouched",
    () => {
      const store = join(root, "tune-store");
      // no batch above the code's 32: the trial goes down to a slower one, so no winner to confirm (2
      // trials, not 6), and PyTorch's threads (tried first beside busy cores) stay as they are
      const r = brim(
        "tune",
        "--store",
        store,
        "--max-batch",
        "32",
        "--fix",
        "cpu_threads",
        "--max-trials",
        "2",
        "--steps",
        "6",
        // at most 2 s measured a trial: the line found and varied is asserted, not a speed
        "--window",
        "2s",
        "--",
        PYTHON,
        "fit_literal.py",
      );
      // a winner or no gain, whichever the measurements say: never an error
      expect([0, 3], r.stderr.slice(-2000)).toContain(r.status);
      expect(r.stderr).toMatch(/batch_size=32 is written in the code at fit_literal\.py:30: trials vary it there, in memory/);
      const [id = "(no tune)"] = readdirSync(join(store, "tunes"));
      const record = JSON.parse(readFileSync(join(store, "tunes", id, "tune.json"), "utf8")) as {
        bindings: { knob: string; via: string; line?: number }[];
        trials: { knobs: Record<string, unknown>; end: string }[];
      };
      expect(record.bindings.map((b) => `${b.knob}:${b.via}:${b.line ?? ""}`)).toEqual(["batch_size:code:30"]);
      // measured to the end, or stopped as slower once measured: both ran the batch they were given
      expect(new Set(record.trials.filter((t) => t.end === "ok" || t.end === "slower").map((t) => t.knobs.batch_size)).size).toBeGreaterThanOrEqual(2);
      expect(readFileSync(join(root, "fit_literal.py"), "utf8")).toBe(before);
    },
    scaled(360_000),
  );

  it(
    "brim plan finds the same line and measures at 16 and 32",
    () => {
      const r = brim("plan", "--json", "--store", join(root, "plan-store"), "--gpu", "t4", "--steps", "2", "--", PYTHON, "fit_literal.py");
      expect(r.status, r.stderr.slice(-2000)).toBe(0);
      expect(r.stderr).toMatch(/batch_size=32 is written in the code at fit_literal\.py:30: the measuring runs vary it there, in memory/);
      const plan = JSON.parse(r.stdout) as { fit: { points: { micro_batch: number }[] } };
      expect(plan.fit.points.map((p) => p.micro_batch).sort((a, b) => a - b)).toEqual([16, 32]);
      expect(readFileSync(join(root, "fit_literal.py"), "utf8")).toBe(before);
    },
    scaled(300_000),
  );
});
