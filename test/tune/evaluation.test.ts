import { describe, expect, it } from "vitest";
import { renderTuneTable } from "../../src/cli/render-tune.ts";
import type { TuneRecord, TuneTrialRecord } from "../../src/record/types.ts";
import { trialEvaluation, tuneEvaluation } from "../../src/tune/evaluation.ts";
import { noWinnerAdvice, trialRecord } from "../../src/tune/record.ts";
import { failureOf } from "../../src/tune/trial.ts";
import type { TrialResult } from "../../src/tune/types.ts";

const train = { where: "/p/train.py:30", use: "train" as const };
const val = (use: "eval" | null) => ({ where: "/p/train.py:31", use });

const trial = (index: number, batch: number, evaluation: TuneTrialRecord["evaluation"], end = "ok"): TuneTrialRecord =>
  ({ index, knobs: { batch_size: batch }, purpose: index === 0 ? "baseline" : "grid", end, evaluation }) as unknown as TuneTrialRecord;

describe("a trial's evaluation, from the loaders the attach saw", () => {
  it("ran when a loader fed batches with gradients off; not seen when one was built and never used beside one that trained", () => {
    expect(trialEvaluation([train, val("eval")])).toEqual({ ran: true, where: "/p/train.py:31" });
    expect(trialEvaluation([train, val(null)])).toEqual({ ran: false, where: "/p/train.py:31" });
  });

  it("is no evidence of evaluation with one training loader, or loaders none of which trained (a trial that crashed first)", () => {
    expect(trialEvaluation([train])).toBeNull();
    expect(trialEvaluation([{ where: "/p/train.py:30", use: null }, val(null)])).toBeNull();
    expect(trialEvaluation([])).toBeNull();
  });

  it("is kept in the trial's record only with evidence", () => {
    const result = { end: "ok", samplesPerSecond: 10, stepSeconds: [], peakBytes: 1, frameworkPeakBytes: null, durationS: 1, oomRecoveries: 0 } as TrialResult;
    expect(trialRecord(0, {}, "baseline", result, null)).not.toHaveProperty("evaluation");
    expect(trialRecord(0, {}, "baseline", { ...result, evaluation: { ran: true, where: "t.py:3" } }, null).evaluation).toEqual({ ran: true, where: "t.py:3" });
  });
});

describe("the verdict's evaluation line", () => {
  it("says nothing of a job with no evidence of evaluation", () => {
    expect(tuneEvaluation([trial(0, 8, undefined), trial(1, 64, undefined)], { batch_size: 64 })).toBeNull();
  });

  it("says evaluation is in the peak when it ran in the trials of the configuration the tune ends with", () => {
    const trials = [trial(0, 8, { ran: true, where: "/p/train.py:31" }), trial(1, 64, { ran: false, where: "/p/train.py:31" }, "cap_exceeded")];
    // no winner: the configuration kept is yours (trial 0)
    expect(tuneEvaluation(trials, null)).toEqual({ ran: true, trials: [0], line: "evaluation ran in the trials (trial 0): its memory is in the peak" });
  });

  it("says evaluation was not measured at the winner's settings when its trials never reached it, what was seen and what to do", () => {
    const trials = [trial(0, 8, { ran: true, where: "/p/train.py:31" }), trial(1, 64, { ran: false, where: "/p/train.py:31" })];
    const verdict = tuneEvaluation(trials, { batch_size: 64 });
    expect(verdict?.ran).toBe(false);
    expect(verdict?.trials).toEqual([0]);
    expect(verdict?.line).toBe(
      "evaluation was not seen in the trials: its memory at the winner's settings was not measured (it ran in trial 0, not at these settings); the loader at p/train.py:31 was built but never iterated there — let the trials reach it (a longer --window or more --steps, and --trial-time to match) or make the job evaluate sooner while tuning, then tune again",
    );
    const never = tuneEvaluation([trial(0, 8, { ran: false, where: null })], null);
    expect(never?.line).toMatch(
      /^evaluation was not seen in the trials: its memory at your configuration's settings was not measured; an evaluation loader was built/,
    );
  });

  it("is printed among the closing lines, and not without it", () => {
    const record = {
      trials: [{ ...trial(0, 8, { ran: true, where: null }), samples_per_s: 100, peak_bytes: 2 ** 28, duration_s: 5, stopped_by: "window" }],
      winner: null,
      no_winner: { reason: "r", next: "n" },
      cap_bytes: 2 ** 30,
      cap_scope: "ram",
      stop_reason: "max_trials",
      id: "t",
      memory_line: null,
    } as unknown as TuneRecord;
    const line = "evaluation ran in the trials (trial 0): its memory is in the peak";
    expect(renderTuneTable({ ...record, evaluation: { ran: true, trials: [0], line } })).toContain(line);
    expect(renderTuneTable(record)).not.toContain("evaluation");
  });
});

describe("a trial that never stepped its optimizer", () => {
  const run = { meta: { end: { cause: "ok", message: "" } }, job: { tail: [] } } as unknown as Parameters<typeof failureOf>[1];

  it("does not count: its cause says no training step, and the tune's no-winner reason repeats it", () => {
    const failure = failureOf("no_steps", run, null, 120, null, 0, 0);
    expect(failure.cause).toMatch(/^no training step: the job ran no optimizer step brim could count: a trial counts only once the job trains/);
    const trials = [{ index: 0, knobs: {}, purpose: "baseline", end: "no_steps", failure, oom_recoveries: 0 }] as unknown as TuneTrialRecord[];
    expect(noWinnerAdvice(trials, "converged", "1 GiB")).toEqual({
      reason: `your configuration (trial 0): ${failure.cause}`,
      next: "make the job train (an optimizer step) within a trial, then tune again",
    });
  });
});
