// A job whose optimizer steps brim counts but whose samples it cannot see (each item a packed batch
// with no batch dimension to tell): the tune keeps those steps, compares batches/s (the micro-batch
// is the job's own, so batches/s follows samples/s for num_workers), reaches a verdict, and its
// closing lines say what it compared and what brim could not see. Which verdict is not asserted: that
// rests on speed.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { hasModules } from "../helpers/python.ts";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const VENV = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? (existsSync(VENV) ? VENV : "/usr/bin/python3");
const hasTorch = hasModules(PYTHON, "torch");
const root = mkdtempSync(join(tmpdir(), "brim-unseen-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe.skipIf(!hasTorch)("steps counted with samples unknown are never thrown away", () => {
  it(
    "tunes num_workers on batches/s and says it compared batches/s, not samples/s",
    () => {
      const store = join(root, "store");
      // a loader worker reads the slow batches beside the loop; the trial without it is the slower one, so
      // the tune ends with your configuration and no A/B confirmation to run (2 trials, not 7)
      const job = [PYTHON, join(REPO, "test", "jobs", "unseen_samples.py"), "--num-workers", "1", "--load-ms", "20"];
      // PyTorch's threads (tried first beside busy cores, where 1 thread can win by far and bring an A/B
      // confirmation) are fixed: the rate's unit is the subject, not a speed (at most 2 s measured a trial)
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
        trials: { index: number; end: string; samples_per_s: number | null; rate_unit?: string; knobs: Record<string, unknown> }[];
        winner: unknown;
        confirmation?: { verdict: string } | null;
      };
      const baseline = record.trials.find((trial) => trial.index === 0);
      // before: "no steps" (the trial kept no rate); now its counted batches are the rate
      expect(baseline?.end).toBe("ok");
      expect(baseline?.rate_unit).toBe("batches");
      expect(baseline?.samples_per_s).toBeGreaterThan(0);
      const measured = record.trials.filter((trial) => trial.samples_per_s !== null);
      expect(measured.length).toBeGreaterThanOrEqual(2);
      expect(measured.every((trial) => trial.rate_unit === "batches")).toBe(true);
      expect(new Set(record.trials.map((trial) => trial.knobs.num_workers)).size).toBeGreaterThan(1);
      // a verdict, whichever it is: a confirmed winner, yours faster, or no gain beyond noise
      expect(["confirmed", "slower", "no_gain"]).toContain(record.confirmation?.verdict);
      expect(result.stdout).toMatch(/#\s+knobs\s+batches\/s/);
      const text = result.stdout.replace(/\s+/g, " ");
      expect(text).toMatch(/brim compared batches\/s: no step of the job said its samples/);
      expect(text).toMatch(/name the batch size as a knob \(--knob batch_size=N\)/);
      // the rate is batches/s, said as such: no claim of samples counted from a knob the job does not have
      expect(result.stderr).toMatch(/→ [\d.]+ batches\/s \(/);
      expect(result.stderr).not.toMatch(/samples counted from the batch_size knob/);
    },
    scaled(600_000),
  );
});
