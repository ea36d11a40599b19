// Counted steps are never discarded: a trial whose optimizer steps brim counted but whose samples
// it could not see takes the job's own samples/s lines when it prints them (an fps column through
// --progress-pattern), else steps/s; tune.json says which. Simulated trials: every rate below is
// arithmetic over the steps and lines given, nothing is timed.
import { describe, expect, it } from "vitest";
import type { GuardResult } from "../../src/guard/guard.ts";
import { renderTrialLine } from "../../src/cli/render-tune.ts";
import { readTimeline } from "../../src/record/timeline/index.ts";
import type { TimelineEntry } from "../../src/record/types.ts";
import { JobRates, withJobRate } from "../../src/tune/job-rate.ts";
import { trialRecord } from "../../src/tune/record.ts";
import { classifyTrial } from "../../src/tune/trial.ts";
import { rateOf, type StepTime } from "../../src/tune/window.ts";

const step = (t: number, seconds: number, samples: number | null = null): StepTime => ({ t, samples, seconds, warmup: false });

describe("the job's own rate lines", () => {
  it("reads samples a second from the job's lines, and a column the user's pattern names", () => {
    const rates = new JobRates("");
    rates.line("update 40 | loss 0.31 | 812.5 samples/s", 10);
    rates.line("step 60: 21.3 it/s", 11);
    expect(rates.rates).toEqual([{ t: 10, samplesPerSec: 812.5 }]);
    const fps = new JobRates(String.raw`fps (?<samples_per_s>\d+(?:\.\d+)?)`);
    fps.line("rollout 3 | fps 2048 | reward 17.0", 12);
    expect(fps.rates).toEqual([{ t: 12, samplesPerSec: 2048 }]);
  });

  it("gives each counted step the rate of the line that covers it; steps that say their samples keep them", () => {
    const steps = [step(1, 0.5), step(2, 0.5), step(3, 1), step(4, 1)];
    const lines = [
      { t: 2.1, samplesPerSec: 100 },
      { t: 4.2, samplesPerSec: 50 },
    ];
    const own = withJobRate(steps, lines);
    expect(own.fromJob).toBe(true);
    expect(own.steps.map((s) => s.samples)).toEqual([50, 50, 50, 50]);
    // Σ samples / Σ seconds: the job's rate weighted by the time each line covers
    expect(rateOf(own.steps)).toBeCloseTo(200 / 3, 9);
    expect(withJobRate([step(1, 0.5, 32)], lines)).toEqual({ steps: [step(1, 0.5, 32)], fromJob: false });
    expect(withJobRate(steps, []).fromJob).toBe(false);
  });
});

/** A trial as brim records it: the attach counted 10 optimizer steps of 0.25 s and no samples; the job printed what `lines` say. */
function trial(lines: { t: number; samplesPerSec: number }[]) {
  const entries = [
    { t: 100, kind: "start", pid: 7 },
    ...Array.from({ length: 10 }, (_, i) => ({
      t: 101 + 0.25 * (i + 1),
      kind: "step",
      pid: 7,
      step: i,
      samples: null,
      wait_s: 0.05,
      compute_s: 0.2,
      warmup: i < 3,
      micro_batch: null,
      accumulation: null,
      loss: 1,
      mem: null,
    })),
    { t: 104, kind: "end", cause: "ok", exit_code: 0, signal: null },
  ] as unknown as TimelineEntry[];
  const run = {
    timeline: readTimeline(entries),
    summary: { peak_tree_rss_bytes: 1e9, peak_tree_gpu_bytes: null, framework_peak_allocated_bytes: null, duration_s: 4, oom_recoveries: 0 },
    meta: { end: { cause: "ok", message: "" }, device: { host: { cpus: 2 } } },
    job: { tail: [] },
  } as unknown as GuardResult;
  const settings = { capScope: "ram" as const, timeLimitS: 120, window: { warmupSteps: 3, maxSteps: 40, minSteps: 3, windowS: 10, stableWithin: 0.02 } };
  return classifyTrial(run, settings, { stop: "steps", detail: "7 steps" }, false, { num_workers: 2 }, null, lines);
}

describe("a trial whose steps brim counted but whose samples it could not see", () => {
  it("compares the job's own samples/s when it prints them, and tune.json says so", () => {
    const result = trial([
      { t: 102.5, samplesPerSec: 900 },
      { t: 103.6, samplesPerSec: 1100 },
    ]);
    expect(result.end).toBe("ok");
    // the steady steps are the last ones; each ending by 102.5 is in the 900/s line's span, the rest in 1100/s
    const ends = Array.from({ length: 10 }, (_, i) => 101 + 0.25 * (i + 1)).slice(10 - result.stepSeconds.length);
    expect(ends.length).toBeGreaterThanOrEqual(3);
    const covered = ends.reduce((sum, t) => sum + (t <= 102.5 ? 900 : 1100), 0);
    expect(result.samplesPerSecond).toBeCloseTo(covered / ends.length, 9);
    expect(result).toMatchObject({ rateFrom: "job", samplesFromKnob: false, samplesPerStep: null });
    expect(result.rateUnit).toBeUndefined();
    expect(trialRecord(1, { num_workers: 2 }, "num_workers", result, "run-1")).toMatchObject({ rate_from: "job", samples_per_s: result.samplesPerSecond });
    expect(renderTrialLine(1, 4, "num_workers=2", result)).toMatch(
      / samples\/s \(steps, .*; the job's own samples\/s over the steps brim counted: no step said its samples\)/,
    );
  });

  it("keeps its counted steps as steps/s when the job prints no rate: never 'no steps'", () => {
    const result = trial([]);
    expect(result.end).toBe("ok");
    expect(result.rateUnit).toBe("steps");
    expect(result.rateFrom).toBeUndefined();
    expect(result.samplesPerSecond).toBeCloseTo(1 / 0.25, 9);
  });
});
