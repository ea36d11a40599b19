// A job of ours whose evaluation holds far more memory than its training (test/jobs/eval_spill.py:
// every 2 optimizer steps a validation pass keeps 2 MiB a sample alive): brim tune, built and run for
// real under a RAM cap, refuses the larger batch with the cap as its cause, and tune.json says that
// evaluation ran in the trials whose memory it measured. The same job evaluating only, never stepping
// its optimizer: trial 0 does not count, and says why. No assertion rests on measured speed or timing:
// the large batch's evaluation holds its peak until brim stops the job (--hold-over-mib), so the polled
// cap sees it however busy the machine, and a trial after one that saw the job evaluate is never stopped
// as slower on a step still running (it may be the evaluation pass: src/tune/window.ts).
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TuneRecord } from "../../src/record/types.ts";
import { hasModules } from "../helpers/python.ts";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const VENV = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? (existsSync(VENV) ? VENV : "/usr/bin/python3");
const JOB = join(REPO, "test", "jobs", "eval_spill.py");
const ready = existsSync(join(REPO, "dist", "cli", "main.js")) && hasModules(PYTHON, "torch");
const root = mkdtempSync(join(tmpdir(), "brim-eval-memory-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** `brim tune` on the job with these tune options and job flags; its exit, output and tune.json. */
function tune(name: string, options: string[], flags: string[]): { status: number | null; stderr: string; stdout: string; record: TuneRecord } {
  const store = join(root, name);
  const r = spawnSync(process.execPath, [BRIM, "tune", "--store", store, "--window", "2s", "--fix", "cpu_threads", ...options, "--", PYTHON, JOB, ...flags], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, NO_COLOR: "1" },
    timeout: scaled(240_000),
  });
  const [id = "(no tune)"] = existsSync(join(store, "tunes")) ? readdirSync(join(store, "tunes")) : [];
  const record = JSON.parse(readFileSync(join(store, "tunes", id, "tune.json"), "utf8")) as TuneRecord;
  return { status: r.status, stderr: r.stderr, stdout: r.stdout, record };
}

describe.skipIf(!ready)("brim tune on a job whose evaluation holds more memory than its training", () => {
  it(
    "refuses the batch whose evaluation goes over the cap, with the cap as cause, and says evaluation ran in the measured trials",
    { timeout: scaled(300_000) },
    () => {
      // 8 a batch: ≈ 400 MiB at its evaluation's peak (64 MiB kept: held 0.25 s); 64 a batch: training as
      // small, its evaluation over the cap from its first batch kept (≈ 620 MiB), ≈ 780 MiB with both
      // (512 MiB kept, over 256: held until brim stops the job)
      const { status, stderr, stdout, record } = tune(
        "spill",
        ["--max-trials", "2", "--strategy", "grid", "--knob", "batch_size=8,64", "--cap", "560MiB"],
        ["--batch-size", "8", "--eval-every", "2", "--hold-over-mib", "256"],
      );
      expect([0, 3], stderr.slice(-3000)).toContain(status);
      const large = record.trials.find((t) => t.knobs.batch_size === 64);
      expect(large?.end).toBe("cap_exceeded");
      expect(large?.failure?.kind).toBe("cap");
      expect(large?.failure?.cause).toMatch(/over the 0\.55 GiB cap/);
      // it trained (the training loader fed its steps) and died in its first evaluation
      expect(large?.tail?.join("\n")).toMatch(/step 2: evaluating \(2 batches of 64\)/);
      expect(record.winner?.knobs.batch_size ?? 8).toBe(8);
      const small = record.trials.find((t) => t.index === 0);
      expect(small?.end).toBe("ok");
      expect(small?.evaluation).toEqual({ ran: true, where: expect.stringMatching(/eval_spill\.py:\d+$/) as unknown });
      expect(record.evaluation).toEqual({ ran: true, trials: [0], line: "evaluation ran in the trials (trial 0): its memory is in the peak" });
      expect(stdout).toContain("evaluation ran in the trials (trial 0): its memory is in the peak");
    },
  );

  it("counts no trial of a job that never steps its optimizer: trial 0 ends with no training step, and no winner", { timeout: scaled(200_000) }, () => {
    const { status, stderr, stdout, record } = tune("eval-only", ["--max-trials", "1"], ["--batch-size", "8", "--eval-only"]);
    expect(status, stderr.slice(-3000)).toBe(3);
    const [trial] = record.trials;
    expect(trial?.end).toBe("no_steps");
    expect(trial?.samples_per_s).toBeNull();
    expect(trial?.failure?.cause).toMatch(/^no training step: the job ran no optimizer step brim could count/);
    expect(record.winner).toBeNull();
    expect(record.no_winner?.reason).toMatch(/^your configuration \(trial 0\): no training step/);
    expect(`${stdout}${stderr}`).toMatch(/no winner: your configuration \(trial 0\): no training step/);
  });
});
