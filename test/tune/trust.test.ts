import { describe, expect, it } from "vitest";
import { humanBytes, renderTrialLine, renderTuneTable } from "../../src/cli/render-tune.ts";
import type { TuneRecord } from "../../src/record/types.ts";
import { searchKnobs, type Knobs, type TrialResult, type TrialRunner } from "../../src/tune/search.ts";
import { accumulationOf, dataShort, effectiveBatchOf, judgeSamples } from "../../src/tune/effective.ts";
import { isWarmupStep } from "../../src/record/timeline/index.ts";
import { samplesMismatch } from "../../src/tune/tune.ts";
import { countedSteps, isStable, MIN_STEADY_S, minimumSeconds, outOfLine, splitWarmup, windowVerdict, type StepTime } from "../../src/tune/window.ts";
import { DEFAULT_ORACLE, FakeClock, SimulatedRunner, stepSeconds } from "./oracle.ts";

const MiB = 2 ** 20;
const steps = (seconds: number[], samples = 32, t0 = 100): StepTime[] => {
  let t = t0;
  // the reporter flags the first step as warm-up (--warmup 1)
  return seconds.map((s, i) => ({ t: (t += s), samples, seconds: s, warmup: i === 0 }));
};
const okResult = (sps: number, extra: Partial<TrialResult> = {}): TrialResult => ({
  end: "ok",
  samplesPerSecond: sps,
  stepSeconds: [0.1, 0.1, 0.1],
  peakBytes: 10 * MiB,
  frameworkPeakBytes: null,
  durationS: 2,
  oomRecoveries: 0,
  ...extra,
});

describe("the measurement window", () => {
  const options = { warmupSteps: 1, maxSteps: 20, minSteps: 3, windowS: 10, stableWithin: 0.02 };

  it("leaves out the flagged warm-up, by the run record's one rule (the same steps as the run's samples/s)", () => {
    expect(splitWarmup(steps([3, 1.9, 1, 1.01, 0.99, 1]), 1).warmup).toBe(1);
    expect(splitWarmup(steps([3, 1, 1.01, 0.99]), 1).steady.map((s) => s.seconds)).toEqual([1, 1.01, 0.99]);
    const unflagged = steps([1, 1, 1]).map((s) => ({ ...s, warmup: false }));
    expect(splitWarmup(unflagged, 0).warmup).toBe(0);
    for (const step of steps([3, 1, 2])) expect(splitWarmup([step], 1).warmup === 1).toBe(isWarmupStep(step));
  });

  it("leaves out a step that fetched far more batches than the others (an evaluation loader between two optimizer steps)", () => {
    // minGPT's adder: after step 0 the job evaluates 100 batches of 100 through its own DataLoader, and
    // the attach counts them in step 1 (101 batches, 10064 samples, 29 s): not a training step
    const withEval = steps([0.1, 29, ...Array<number>(40).fill(0.025)], 64).map((s, i) => ({
      ...s,
      samples: i === 1 ? 10064 : 64,
      batches: i === 1 ? 101 : 1,
    }));
    const split = splitWarmup(withEval, 1);
    expect(split.warmup).toBe(1);
    expect(split.outOfLine).toBe(1);
    expect(split.steady.every((s) => s.samples === 64)).toBe(true);
    expect(outOfLine([{ batches: 4 }, { batches: 4 }, { batches: 8 }, { batches: 9 }])).toEqual([false, false, false, true]);
    expect(outOfLine([{ batches: null }, {}])).toEqual([false, false]);
    // the 29 s step alone is no window: the trial keeps measuring the training steps after it
    const early = withEval.slice(0, 2);
    expect(windowVerdict(early, (early[1] as StepTime).t, options, { best: null, noise: 0.01 })).toBeNull();
    const v = windowVerdict(withEval, (withEval.at(-1) as StepTime).t, options, { best: null, noise: 0.01 });
    expect(v?.stop).toMatch(/stable|steps/);
  });

  it("measures from the attach's steps, not the printed progress that runs ahead of them (the HF Trainer's bar)", () => {
    const bar = steps([0.1, 0.1, 0.1, 0.1, 0.1, 0.1], 8).map((s) => ({ ...s, samples: null, printed: true }));
    // the attach saw the DataLoader: the bar alone decides nothing, whatever it shows
    expect(countedSteps(bar, true)).toEqual([]);
    expect(windowVerdict(countedSteps(bar, true), (bar.at(-1) as StepTime).t, options, { best: null, noise: 0.01 })).toBeNull();
    // no loader seen and nothing counted: the printed steps are all there is
    expect(countedSteps(bar, false)).toHaveLength(6);
    // once counted steps come, the printed ones are dropped
    const counted = steps([0.5, 0.4], 32);
    expect(countedSteps([...bar, ...counted], false)).toEqual(counted);
  });

  it("stops once stable, not before; noisy steps run to the window", () => {
    expect(isStable(steps([1, 1.005, 0.995, 1.0]), 3, 0.02)).toBe(true);
    expect(isStable(steps([1, 1.3, 0.8, 1.2]), 3, 0.02)).toBe(false);
    const stable = steps([2, 1, 1.002, 0.998, 1.001]);
    expect(windowVerdict(stable, (stable.at(-1) as StepTime).t, options, { best: null, noise: 0.01 })?.stop).toBe("stable");
    const noisy = steps([2, 1, 1.4, 0.7, 1.3, 0.8, 1.2, 0.9, 1.5, 0.6, 1.2, 0.9]);
    expect(windowVerdict(noisy.slice(0, 5), (noisy[4] as StepTime).t, options, { best: null, noise: 0.01 })).toBeNull();
    expect(windowVerdict(noisy, (noisy.at(-1) as StepTime).t, options, { best: null, noise: 0.01 })?.stop).toBe("window");
  });

  it("stops a trial clearly slower than the best, even mid-step (a bound from the samples in flight)", () => {
    const measured = steps([2, 1, 1.3, 0.8]);
    const verdict = windowVerdict(measured, (measured.at(-1) as StepTime).t, options, { best: 100, noise: 0.01 });
    expect(verdict?.stop).toBe("slower");
    // the number the stop was decided on is kept: 3 steady steps of 32 samples in 3.1 s
    expect(verdict?.rate).toBeCloseTo(96 / 3.1, 6);
    const inFlight = steps([5, 1], 2048);
    const last = (inFlight.at(-1) as StepTime).t;
    expect(windowVerdict(inFlight, last + 0.5, options, { best: 10000, noise: 0.01 })).toBeNull();
    const bound = windowVerdict(inFlight, last + 10, options, { best: 10000, noise: 0.01 });
    expect(bound?.stop).toBe("slower");
    expect(bound?.bound).toBeLessThan(7000);
  });

  it("never stops before one steady step, nor on milliseconds of steps: an early stop needs evidence beyond the noise", () => {
    // a first (warm-up) step still running after 40 s: no steady step yet, so no verdict (the time limit ends it)
    const warm = steps([5], 2048);
    expect(windowVerdict(warm, (warm[0] as StepTime).t + 40, options, { best: 100, noise: 0.01 })).toBeNull();
    // fast steps far under the best, but 30 ms of them: below the floor of steady time, not a verdict yet
    const fast = steps([0.05, 0.01, 0.01, 0.01], 1);
    expect(windowVerdict(fast, (fast.at(-1) as StepTime).t, options, { best: 1000, noise: 0.01 })).toBeNull();
    // nor stable nor the step budget: a handful of identical fast steps keeps measuring to the floor
    const quick = steps([0.05, ...Array<number>(30).fill(0.01)], 8);
    expect(windowVerdict(quick, (quick.at(-1) as StepTime).t, options, { best: null, noise: 0.01 })).toBeNull();
    const floor = minimumSeconds(options, 0.01);
    expect(floor).toBe(MIN_STEADY_S);
    const long = steps([0.05, ...Array<number>(150).fill(0.01)], 8);
    expect(windowVerdict(long, (long.at(-1) as StepTime).t, options, { best: null, noise: 0.01 })?.stop).toMatch(/stable|steps/);
    // the floor grows with the noise between trials, up to a third of the window
    expect(minimumSeconds(options, 0.04)).toBe(2);
    expect(minimumSeconds(options, 0.5)).toBeCloseTo(10 / 3, 6);
  });
});

describe("trust", () => {
  it("--knob batch_size=32,64,128 tries exactly those micro-batches", async () => {
    const clock = new FakeClock();
    const runner = new SimulatedRunner(DEFAULT_ORACLE, { capBytes: 2 ** 30, clock });
    const outcome = await searchKnobs({ baseline: { batch_size: 8 }, microBatch: { knob: "batch_size", values: [32, 64, 128] }, others: [] }, runner, {
      capBytes: 2 ** 30,
      maxTrials: 10,
      maxTimeS: 1e6,
      now: clock.now,
    });
    const tried = [...new Set(runner.calls.map((c) => c.knobs.batch_size))];
    expect(tried.sort((a, b) => Number(a) - Number(b))).toEqual([8, 32, 64, 128]);
    expect(outcome.best).not.toBeNull();
  });

  it("no upward probe whose step would outlast the measurement window", async () => {
    const clock = new FakeClock();
    const spec = { ...DEFAULT_ORACLE, knee: Infinity };
    const runner = new SimulatedRunner(spec, { capBytes: 2 ** 30, clock });
    // micro-batch 16 steps in ~16 ms; without the window the curve (no knee) would take it to the cap
    const outcome = await searchKnobs({ baseline: { batch_size: 16 }, microBatch: { knob: "batch_size" }, others: [] }, runner, {
      capBytes: 2 ** 30,
      maxTrials: 10,
      maxTimeS: 1e6,
      now: clock.now,
      maxStepS: 0.05,
    });
    for (const call of runner.calls) expect(stepSeconds(spec, call.knobs)).toBeLessThanOrEqual(0.05);
    expect(outcome.notes.join("\n")).toMatch(/not tried: a step there would take more than the 0.05 s measurement window/);
  });

  it("a crash is not a memory ceiling: the memory line keeps its margin and the purpose says why", async () => {
    const calls: { knobs: Knobs; purpose: string }[] = [];
    const runner: TrialRunner = {
      run(knobs, purpose) {
        calls.push({ knobs, purpose });
        const m = Number(knobs.batch_size);
        if (m > 1000)
          return Promise.resolve({
            ...okResult(0),
            end: "crashed",
            samplesPerSecond: null,
            failure: { kind: "crash", cause: "ValueError: batch larger than the dataset" },
          });
        return Promise.resolve(okResult(100 * Math.log2(m), { peakBytes: (50 + m / 100) * MiB, stepSeconds: [0.1, 0.1, 0.1] }));
      },
    };
    const now = (): number => calls.length;
    const outcome = await searchKnobs({ baseline: { batch_size: 32 }, microBatch: { knob: "batch_size" }, others: [] }, runner, {
      capBytes: 8 * 2 ** 30,
      maxTrials: 12,
      maxTimeS: 1e6,
      now,
    });
    const bisect = calls.find((c) => c.purpose.startsWith("bisect"));
    expect(bisect?.purpose).toMatch(/crashed|not for lack of memory/);
    // a memory failure at the crash's micro-batch would have pulled the line's limit under it
    expect(outcome.memoryLine?.predictedMaxMicroBatch ?? 0).toBeGreaterThan(1024);
  });

  it("a winner within noise of the baseline gives way to it", async () => {
    let i = 0;
    const rates: Record<number, number[]> = { 32: [1000, 1010, 995], 64: [1012, 990, 1003], 128: [1005, 998, 1001] };
    const runner: TrialRunner = {
      run(knobs) {
        const m = Number(knobs.batch_size);
        const list = rates[m] ?? [900];
        const sps = list[i++ % list.length] as number;
        return Promise.resolve(okResult(sps, { peakBytes: (50 + m) * MiB, stepSeconds: [0.1, 0.102, 0.098, 0.1] }));
      },
    };
    const outcome = await searchKnobs({ baseline: { batch_size: 32 }, microBatch: { knob: "batch_size", values: [32, 64, 128] }, others: [] }, runner, {
      capBytes: 2 ** 30,
      maxTrials: 10,
      maxTimeS: 1e6,
      now: () => i,
    });
    expect(outcome.best?.knobs.batch_size).toBe(32);
    expect(outcome.notes.join("\n")).toMatch(/the baseline is already as good/);
  });

  it("a re-measure stopped as slower does not make a measured configuration ineligible, and the winner is never slower than the baseline", async () => {
    let calls = 0;
    const runner: TrialRunner = {
      run(knobs) {
        calls++;
        const m = Number(knobs.batch_size);
        // the baseline's second trial is cut short as slower (a noisy moment); 128 is slower than the baseline
        if (m === 32 && calls > 1) return Promise.resolve({ ...okResult(13), end: "slower", failure: { kind: "slower", cause: "noise" } });
        return Promise.resolve(okResult(m === 32 ? 19 : m === 128 ? 15 : 12, { peakBytes: (50 + m) * MiB, stepSeconds: [0.1, 0.1, 0.1, 0.1] }));
      },
    };
    const outcome = await searchKnobs(
      { baseline: { batch_size: 32 }, microBatch: { knob: "batch_size", values: [32, 64, 128] }, others: [{ knob: "num_workers", values: [0, 1] }] },
      runner,
      { capBytes: 2 ** 30, maxTrials: 8, maxTimeS: 1e6, now: () => calls },
    );
    expect(outcome.best?.knobs.batch_size).toBe(32);
    expect(outcome.best?.samplesPerSecond).toBe(19);
  });

  it("samples per step must follow the micro-batch (the sequence-first bug)", () => {
    const base = { knobs: { batch_size: 32 }, result: okResult(100, { samplesPerStep: 32 * 240 }) };
    expect(samplesMismatch(base, { knobs: { batch_size: 128 }, result: okResult(100, { samplesPerStep: 32 * 240 }) })).toMatch(
      /did not follow the effective batch/,
    );
    expect(samplesMismatch(base, { knobs: { batch_size: 128 }, result: okResult(100, { samplesPerStep: 128 * 240 }) })).toBeNull();
    expect(samplesMismatch(base, { knobs: { batch_size: 32 }, result: okResult(100, { samplesPerStep: 1 }) })).toBeNull();
  });

  it("a step that grew with the batch but less than asked is a batch larger than the data, not a job counting something else", () => {
    const base = { knobs: { batch_size: 128 }, result: okResult(100, { samplesPerStep: 128 }) };
    expect(dataShort(base, { knobs: { batch_size: 8192 }, result: okResult(100, { samplesPerStep: 6000 }) })).toBe(
      "batch larger than the data: micro-batch 8192 × 1 asked for 8192 samples per step, the job ran 6000 (all the data it has, it seems)",
    );
    expect(dataShort(base, { knobs: { batch_size: 2048 }, result: okResult(100, { samplesPerStep: 2048 }) })).toBeNull();
    // the same count whatever the batch (a sequence-first job counting time steps) stays a mismatch, not data
    expect(dataShort(base, { knobs: { batch_size: 512 }, result: okResult(100, { samplesPerStep: 128 }) })).toBeNull();
    expect(dataShort(base, { knobs: { batch_size: 64 }, result: okResult(100, { samplesPerStep: 40 }) })).toBeNull();
    // 6000 samples in batches of 5120: steps of 5120 and 880 take turns, the median may be either
    const turns = { knobs: { batch_size: 5120 }, result: okResult(100, { samplesPerStep: 880, samplesPerStepMax: 5120 }) };
    expect(dataShort(base, turns)).toBeNull();
    expect(samplesMismatch(base, turns)).toBeNull();
    // accelerate's accumulation: now and then a step carries one batch more (80 of 16 × 4); the median is the batch
    const held = { knobs: { batch_size: 16, accumulation: 4 }, result: okResult(100, { samplesPerStep: 64, samplesPerStepMax: 80, accumulation: 4 }) };
    const doubled = { knobs: { batch_size: 32, accumulation: 4 }, result: okResult(100, { samplesPerStep: 128, samplesPerStepMax: 160, accumulation: 4 }) };
    expect(dataShort(held, doubled)).toBeNull();
    expect(samplesMismatch(held, doubled)).toBeNull();
    // a trial stopped early as slower measured its steps too: jax-mnist-classifier's 8192 on 6000 samples read as a mismatch
    const slower = { knobs: { batch_size: 8192 }, result: { ...okResult(3498, { samplesPerStep: 6000, samplesPerStepMax: 6000 }), end: "slower" as const } };
    expect(judgeSamples(base, slower)).toEqual({
      short: "batch larger than the data: micro-batch 8192 × 1 asked for 8192 samples per step, the job ran 6000 (all the data it has, it seems)",
      mismatch: null,
    });
    const counting = { knobs: { batch_size: 512 }, result: okResult(100, { samplesPerStep: 128 }) };
    const judged = judgeSamples(base, counting);
    expect(judged.short).toBeNull();
    expect(judged.mismatch).toMatch(/did not follow the effective batch/);
  });

  it("samples per step follow the effective batch: micro-batch × the accumulation that really ran", () => {
    // accelerate with accumulation 4, the effective batch held: 16 × 4 → 64 × 1 keeps 64 samples per optimizer step
    const held = { knobs: { batch_size: 16, accumulation: 4 }, result: okResult(100, { samplesPerStep: 64, accumulation: 4 }) };
    expect(samplesMismatch(held, { knobs: { batch_size: 64, accumulation: 1 }, result: okResult(100, { samplesPerStep: 64, accumulation: 1 }) })).toBeNull();
    // accumulation in the job's code (no knob): the attach reports 16 batches per step
    const inCode = { knobs: { batch_size: 4 }, result: okResult(100, { samplesPerStep: 64, accumulation: 16 }) };
    expect(samplesMismatch(inCode, { knobs: { batch_size: 208 }, result: okResult(100, { samplesPerStep: 3328, accumulation: 16 }) })).toBeNull();
    expect(effectiveBatchOf({ batch_size: 208 }, { accumulation: 16 })).toBe(3328);
    expect(effectiveBatchOf({ batch_size: 16, accumulation: 4 }, null)).toBe(64);
    expect(accumulationOf({ batch_size: 16 }, null)).toBe(1);
    // a sequence-first job under accumulation still fails the check
    expect(samplesMismatch(held, { knobs: { batch_size: 64, accumulation: 2 }, result: okResult(100, { samplesPerStep: 64 * 240, accumulation: 2 }) })).toMatch(
      /16 × 4 → 64 × 2/,
    );
  });

  it("a stop asked by the tune ends the search as untrusted", async () => {
    const clock = new FakeClock();
    const runner = new SimulatedRunner(DEFAULT_ORACLE, { capBytes: 2 ** 30, clock });
    const outcome = await searchKnobs({ baseline: { batch_size: 8 }, microBatch: { knob: "batch_size" }, others: [] }, runner, {
      capBytes: 2 ** 30,
      maxTrials: 10,
      maxTimeS: 1e6,
      now: clock.now,
      stopWhen: () => (runner.calls.length >= 2 ? "untrusted" : null),
    });
    expect(outcome.stopReason).toBe("untrusted");
    expect(runner.calls.length).toBe(2);
  });
});

describe("what the terminal shows", () => {
  const record: TuneRecord = {
    schema: "brim.tune/v1",
    id: "20261122-000000-abcd",
    command: ["python", "train.py"],
    cwd: "/p",
    bindings: [],
    cap_bytes: 6 * 2 ** 30,
    cap_scope: "ram",
    effective_batch: null,
    started_at: "",
    ended_at: "",
    stop_reason: "converged",
    strategy: "brim",
    notes: [],
    budget: { max_trials: 6, max_time_s: 1200 },
    memory_line: { intercept_bytes: 400 * MiB, bytes_per_sample: 1.2105400934595054, margin_bytes: 120 * MiB, predicted_max_micro_batch: 4096 },
    trials: [0, 1, 2].map((index) => ({
      index,
      run_id: null,
      knobs: { batch_size: 32 * 2 ** index, num_workers: 0, pin_memory: false, persistent_workers: false, precision: "fp32" },
      purpose:
        "memory probe: micro-batch 128 (×4.0 the largest that ran; at most 4.11 GiB even if all memory grew with the micro-batch) and more words to make it long",
      end: "ok",
      samples_per_s: 40 + index,
      peak_bytes: 500 * MiB,
      framework_peak_bytes: null,
      gpu_util_mean: null,
      data_wait_share: null,
      duration_s: 12,
      oom_recoveries: 0,
      fixed_cost_s: 2.5,
    })),
    winner: { index: 2, knobs: { batch_size: 128, num_workers: 0, pin_memory: false, persistent_workers: false, precision: "fp32" }, speedup: 1.05 },
    effective_batch_policy: { kind: "free", before: 32, after: 128, text: "effective batch free: the winner changes it from 32 to 128 (×4.00)" },
  };

  it("fits the table to the terminal width and says bytes in human units", () => {
    for (const width of [80, 120, 160]) {
      const text = renderTuneTable(record, width);
      for (const line of text.split("\n")) expect(line.length, line).toBeLessThanOrEqual(width);
      expect(text).toContain("1.2 B × micro-batch");
      expect(text).not.toContain("1.2105400934595054");
      expect(text).toContain("effective batch free: the winner changes it from 32 to 128");
    }
    expect(humanBytes(3 * MiB)).toBe("3.00 MiB");
  });

  it("a failed trial's line carries its cause and last output lines", () => {
    const line = renderTrialLine(3, 6, "batch_size=4096", {
      ...okResult(0),
      end: "crashed",
      samplesPerSecond: null,
      failure: { kind: "crash", cause: "ValueError: batch larger than the dataset" },
      tail: ["loading", "ValueError: batch larger than the dataset"],
    });
    expect(line).toMatch(/^trial 3\/6 batch_size=4096 → crashed \(not out of memory\): ValueError: batch larger than the dataset/);
    expect(line.split("\n").slice(-2)).toEqual(["  | loading", "  | ValueError: batch larger than the dataset"]);
  });
});
