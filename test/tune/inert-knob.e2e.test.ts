import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

// `brim tune` on a job that takes --batch-size and then overwrites it (test/jobs/overwritten_batch.py,
// shaped like rollout-based scripts: the batch is derived from other settings): the trials vary a value
// nothing trains on, and the tune says the knob looks inert instead of comparing their samples/s.
const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? join(REPO, ".venv", "bin", "python");
// found, not imported: an import of torch is seconds of CPU, and the trials import it anyway
const hasTorch =
  existsSync(PYTHON) && spawnSync(PYTHON, ["-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"]).status === 0;
const built = existsSync(join(REPO, "dist", "cli", "main.js"));
const root = mkdtempSync(join(tmpdir(), "brim-inert-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe.skipIf(!hasTorch || !built)("a batch-size flag the job overwrites", () => {
  it(
    "is varied, the job trains on 64 samples a step whatever it says, and the tune names the knob inert and picks no winner",
    () => {
      const store = join(root, "store");
      const r = spawnSync(
        process.execPath,
        [
          join(REPO, "bin", "brim.js"),
          "tune",
          "--store",
          store,
          // the baseline and one other batch: the two the knob looks inert between
          "--max-trials",
          "2",
          "--steps",
          "6",
          // beside busy cores cpu_threads would be tried first (test/tune/cpu-threads.test.ts), and the
          // loader's data wait calls for workers before the batch; this test is about the batch flag
          "--fix",
          "cpu_threads",
          "--fix",
          "num_workers",
          "--",
          PYTHON,
          join(REPO, "test/jobs/overwritten_batch.py"),
          "--batch-size",
          "256",
        ],
        { encoding: "utf8", timeout: scaled(300_000), env: { ...process.env, NO_COLOR: "1" } },
      );
      expect(r.status, r.stderr.slice(-2000)).toBe(3);
      expect(r.stderr).toMatch(/but the job ran 64 → 64 samples per step, the same batch: the batch_size knob looks inert/);
      const [id = "(no tune)"] = readdirSync(join(store, "tunes"));
      const record = JSON.parse(readFileSync(join(store, "tunes", id, "tune.json"), "utf8")) as {
        stop_reason: string;
        trials: { knobs: Record<string, unknown>; end: string; samples_per_step: number | null }[];
      };
      expect(record.stop_reason).toBe("untrusted");
      const ok = record.trials.filter((t) => t.end === "ok");
      expect(new Set(ok.map((t) => t.knobs.batch_size)).size).toBeGreaterThanOrEqual(2);
      expect(new Set(ok.map((t) => t.samples_per_step))).toEqual(new Set([64]));
    },
    scaled(360_000),
  );
});
