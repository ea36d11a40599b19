// A knob that changes what the DataLoader yields but not what the model is fed per step (a library
// drawing its model batch from the loader's: windows sampled from series) makes samples/s grow with
// the knob while the model's work stays the same. The attach's count of the model's input, beside the
// loader's, tells it; no winner is picked on those numbers. Pure: counts only, nothing is timed.
import { describe, expect, it } from "vitest";
import type { GuardResult } from "../../src/guard/guard.ts";
import { readTimeline } from "../../src/record/timeline/index.ts";
import type { TimelineEntry } from "../../src/record/types.ts";
import { classifyTrial } from "../../src/tune/trial.ts";
import type { TrialResult } from "../../src/tune/types.ts";
import { judgeSamples, MODEL_WORK_ONLY, modelWorkUnmoved, MODEL_WORK_UNMOVED, samplesMismatch } from "../../src/tune/effective.ts";
import { noWinnerAdvice, trialRecord } from "../../src/tune/record.ts";

const ok = (samplesPerStep: number, modelSamplesPerStep: number | null): TrialResult => ({
  end: "ok",
  samplesPerSecond: 100,
  stepSeconds: [0.4, 0.4, 0.4],
  peakBytes: 1,
  frameworkPeakBytes: null,
  durationS: 20,
  oomRecoveries: 0,
  samplesPerStep,
  modelSamplesPerStep,
});

describe("a knob that changes the loader's batch, not the model's", () => {
  it("loader 32 → 64 with the model fed 256 → 256: the knob is said not to change the model's work, and no winner is trusted", () => {
    const base = { knobs: { batch_size: 32 }, result: ok(32, 256) };
    const other = { knobs: { batch_size: 64 }, result: ok(64, 256) };
    const finding = modelWorkUnmoved(base, other);
    expect(finding).toMatch(
      /^the model was fed the same samples per step: 32 × 1 → 64 × 1 moved the DataLoader's samples per step 32 → 64 \(×2\.00\) but the batch dimension of the model's input stayed 256 → 256: .*no winner is picked/,
    );
    expect(judgeSamples(base, other)).toEqual({ short: null, mismatch: finding });
    const trials = [trialRecord(0, base.knobs, "baseline", base.result, "r0"), trialRecord(1, other.knobs, "micro-batch", other.result, "r1")];
    expect(trials.map((t) => t.model_samples_per_step)).toEqual([256, 256]);
    expect(noWinnerAdvice(trials, "untrusted", "1 GiB", finding).reason).toMatch(/changes what the DataLoader yields, not what the model is fed each step/);
  });

  it("loader 32 → 64 with the model fed 32 → 64 (or 64 → 128, a two-view job): the knob moves the model's work, nothing to say", () => {
    const base = { knobs: { batch_size: 32 }, result: ok(32, 32) };
    expect(modelWorkUnmoved(base, { knobs: { batch_size: 64 }, result: ok(64, 64) })).toBeNull();
    expect(judgeSamples(base, { knobs: { batch_size: 64 }, result: ok(64, 64) })).toEqual({ short: null, mismatch: null });
    expect(modelWorkUnmoved({ knobs: { batch_size: 32 }, result: ok(32, 64) }, { knobs: { batch_size: 64 }, result: ok(64, 128) })).toBeNull();
  });

  it("says nothing without the model's count in both trials, or when the loader's count did not move (another knob)", () => {
    const base = { knobs: { batch_size: 32 }, result: ok(32, 256) };
    expect(modelWorkUnmoved(base, { knobs: { batch_size: 64 }, result: ok(64, null) })).toBeNull();
    expect(modelWorkUnmoved({ knobs: { batch_size: 32 }, result: ok(32, null) }, { knobs: { batch_size: 64 }, result: ok(64, 256) })).toBeNull();
    expect(modelWorkUnmoved(base, { knobs: { batch_size: 32, num_workers: 2 }, result: ok(32, 256) })).toBeNull();
    // the other untrusted finding keeps its own advice
    expect(noWinnerAdvice([], "untrusted", "1 GiB", "samples per step did not follow the effective batch: ...").reason).not.toMatch(MODEL_WORK_UNMOVED);
  });
});

describe("a knob that sizes the model's batch, not the loader's (the mirror case)", () => {
  it("loader 32 → 32 with the model fed 256 → 16: said as such, not as an inert knob, with its own no-winner advice", () => {
    const base = { knobs: { batch_size: 256 }, result: ok(32, 256) };
    const other = { knobs: { batch_size: 16 }, result: ok(32, 16) };
    const finding = samplesMismatch(base, other);
    expect(finding).toMatch(
      new RegExp(
        `^${MODEL_WORK_ONLY}: 256 × 1 → 16 × 1 \\(×0\\.06\\) moved the batch dimension of the model's input 256 → 16, while the DataLoader's samples per step, which brim counts, stayed 32 → 32`,
      ),
    );
    expect(noWinnerAdvice([], "untrusted", "", finding).next).toMatch(/report the samples the model trains on per step yourself/);
    // without the model's count, or with a model's count that did not follow either: the inert knob as before
    expect(samplesMismatch(base, { ...other, result: ok(32, null) })).toMatch(/looks inert/);
    expect(samplesMismatch(base, { ...other, result: ok(32, 256) })).toMatch(/looks inert/);
  });
});

describe("a trial's model samples per step", () => {
  it("is the median of the steps that carried the attach's model_samples, warm-up steps among them", () => {
    const entries = [
      { t: 100, kind: "start", pid: 7 },
      ...Array.from({ length: 8 }, (_, i) => ({
        t: 101 + 0.25 * (i + 1),
        kind: "step",
        pid: 7,
        step: i,
        samples: 32,
        wait_s: 0.05,
        compute_s: 0.2,
        warmup: i < 3,
        micro_batch: 32,
        accumulation: 1,
        loss: 1,
        mem: null,
        source: "attach",
        ...(i >= 1 && i <= 3 ? { extra: { model_samples: i === 2 ? 250 : 256 } } : {}),
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
    const result = classifyTrial(run, settings, { stop: "steps", detail: "5 steps" }, false, { batch_size: 32 });
    expect(result).toMatchObject({ end: "ok", samplesPerStep: 32, modelSamplesPerStep: 256 });
  });
});
