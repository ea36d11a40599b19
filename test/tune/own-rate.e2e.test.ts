// A job whose optimizer steps brim counts but whose samples it cannot see, and which prints its own
// samples/s: the tune compares the job's own rate over the steps brim counted (not steps/s, not "no
// steps"), and tune.json says the rate is the job's (rate_from). Which verdict is not asserted: that
// rests on speed.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";
import { hasModules } from "../helpers/python.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const VENV = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? (existsSync(VENV) ? VENV : "/usr/bin/python3");
const hasTorch = hasModules(PYTHON, "torch");
const root = mkdtempSync(join(tmpdir(), "brim-own-rate-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe.skipIf(!hasTorch)("a job that prints its own samples/s where brim cannot count its samples", () => {
  it(
    "is tuned on the job's own samples/s, and tune.json says the rate is the job's",
    () => {
      const store = join(root, "store");
      // a loader worker reads the slow batches beside the loop; the trial without it is the slower one, so
      // the tune ends with your configuration and no A/B confirmation to run (2 trials, not 6)
      const job = [PYTHON, join(REPO, "test", "jobs", "own_rate.py"), "--num-workers", "1", "--load-ms", "20"];
      // PyTorch's threads (tried first beside busy cores, where 1 thread can win by far and bring an A/B
      // confirmation) are fixed: the rate's source is the subject, not a speed (at most 2 s measured a trial)
      const result = spawnSync(
        process.execPath,
        [BRIM, "tune", "--store", store, "--fix", "cpu_threads", "--window", "2s", "--max-trials", "2", "--knob", "num_workers=1,0", "--", ...job],
        {
          cwd: root,
          encoding: "utf8",
          env: { ...process.env, NO_COLOR: "1" },
          timeout: scaled(600_000),
        },
      );
      expect(result.status, result.stderr).toBe(0);
      const tunes = join(store, "tunes");
      const [id] = readdirSync(tunes);
      const record = JSON.parse(readFileSync(join(tunes, id as string, "tune.json"), "utf8")) as {
        trials: { index: number; end: string; samples_per_s: number | null; rate_unit?: string; rate_from?: string }[];
        confirmation?: { verdict: string } | null;
      };
      const baseline = record.trials.find((trial) => trial.index === 0);
      expect(baseline).toMatchObject({ end: "ok", rate_from: "job" });
      expect(baseline?.rate_unit).toBeUndefined();
      expect(baseline?.samples_per_s).toBeGreaterThan(0);
      const measured = record.trials.filter((trial) => trial.samples_per_s !== null);
      expect(measured.length).toBeGreaterThanOrEqual(2);
      expect(measured.every((trial) => trial.rate_from === "job" && trial.rate_unit === undefined)).toBe(true);
      expect(["confirmed", "slower", "no_gain"]).toContain(record.confirmation?.verdict);
      expect(result.stdout).toMatch(/#\s+knobs\s+samples\/s/);
      expect(result.stdout.replace(/\s+/g, " ")).toMatch(
        /brim compared the job's own samples\/s \(the rate lines it prints, over the optimizer steps brim counted\)/,
      );
      expect(result.stderr).toMatch(/trial 0\/\d+ .*→ [\d.]+ samples\/s \(.*the job's own samples\/s over the steps brim counted/);
    },
    scaled(600_000),
  );
});
