import { describe, expect, it } from "vitest";
import { renderTrialLine, renderTuneTable } from "../../src/cli/render-tune.ts";
import type { TuneRecord } from "../../src/record/types.ts";
import { confirmSpeedup } from "../../src/tune/confirm.ts";
import { searchKnobs } from "../../src/tune/search.ts";
import { newSearcher } from "../../src/tune/strategies/searcher.ts";
import type { Knobs, TrialResult, TuneSpace } from "../../src/tune/types.ts";
import { describeNoise, intervalsOverlap, NOISE_FLOOR, noiseEstimate } from "../../src/tune/strategies/noise.ts";
import { firstStepBudget } from "../../src/tune/trial-budget.ts";
import { MAX_NOISE_STEPS, MIN_STEADY_STEPS, noiseSteps, windowVerdict, type StepTime, type WindowOptions } from "../../src/tune/window.ts";

/** Steps of the given seconds, back to back from t = 100, 4 samples each. */
const stepsOf = (seconds: readonly number[], warmup = 0): StepTime[] =>
  seconds.map((s, i) => ({ t: 100 + seconds.slice(0, i + 1).reduce((a, b) => a + b, 0), samples: 4, seconds: s, warmup: i < warmup }));

// recorded shape: a diffusion trainer beside a busy core, steps of 5 to 18 s
const DIFFUSION = [11.2, 17.8, 6.1, 5.4, 12.9, 9.8, 14.1, 7.7, 16.3, 6.6, 10.4, 12.2];
// recorded shape: a small CNN, steps within 1 % of each other
const STEADY = [0.101, 0.1, 0.099, 0.1, 0.1005, 0.0995];

const soft: WindowOptions = { warmupSteps: 0, maxSteps: 20, minSteps: 3, windowS: 10, stableWithin: 0.02, noiseTarget: 0.01 };
const end = (steps: StepTime[]): number => (steps.at(-1) as StepTime).t;

describe("K from the noise the job's steps show", () => {
  it("asks three steps of a steady job, the most of a noisy one, and never fewer than three", () => {
    expect(noiseSteps(STEADY, 0.01, 20)).toBe(MIN_STEADY_STEPS);
    expect(noiseSteps(DIFFUSION, 0.01, 20)).toBe(20);
    expect(noiseSteps(DIFFUSION, 0.01, 8)).toBe(8);
    // between: steps ±5 % ask for more than three, fewer than the cap
    const middling = [1, 1.05, 0.95, 1.02, 0.98, 1.04, 0.96, 1];
    const k = noiseSteps(middling, 0.01, 20);
    expect(k).toBeGreaterThan(MIN_STEADY_STEPS);
    expect(k).toBeLessThan(20);
    // fewer than three steps cannot show their noise
    expect(noiseSteps([5, 18], 0.01, 20)).toBe(MIN_STEADY_STEPS);
  });

  it("holds the default window until a noisy job's steps are K, and lets a steady job's end at three", () => {
    const noisy = stepsOf(DIFFUSION);
    // 10 s passed after two steps, and after three: the window does not end it
    expect(windowVerdict(noisy.slice(0, 3), end(noisy.slice(0, 3)), soft, { best: null, noise: 0.01 })).toBeNull();
    expect(windowVerdict(noisy.slice(0, 12), end(noisy.slice(0, 12)), soft, { best: null, noise: 0.01 })).toBeNull();
    const more = stepsOf([...DIFFUSION, ...DIFFUSION]).slice(0, MAX_NOISE_STEPS);
    const v = windowVerdict(more, end(more), { ...soft, maxSteps: 40 }, { best: null, noise: 0.01 });
    expect(v?.stop).toBe("window");
    expect(v?.detail).toMatch(/\(20 steps: K = 20 for this job's step noise\)/);
    // a steady job whose steps are slower than the window still stops at three
    const steady = stepsOf(STEADY.map((s) => s * 40));
    expect(windowVerdict(steady.slice(0, 3), end(steady.slice(0, 3)), soft, { best: null, noise: 0.01 })?.stop).toMatch(/window|stable/);
  });

  it("stops a noisy trial as clearly slower before K steps only when its own interval lies under the limit", () => {
    const three = stepsOf(DIFFUSION).slice(0, 3);
    const long = { ...soft, windowS: 600 };
    // 0.34 samples/s over three steps of ±28 %, against a best of 0.5 (limit 0.4): not yet
    expect(windowVerdict(three, end(three), long, { best: 0.5, noise: 0.02 })).toBeNull();
    // a --window given keeps the three-step rule
    expect(windowVerdict(three, end(three), { ...long, noiseTarget: undefined }, { best: 0.5, noise: 0.02 })?.stop).toBe("slower");
    // against a best of 1.0 (limit 0.8) the interval is clear of it: stopped at three
    expect(windowVerdict(three, end(three), long, { best: 1, noise: 0.02 })?.stop).toBe("slower");
  });

  it("honours --steps as K's cap and a --window given as an override (no noise target: three steps)", () => {
    const noisy = stepsOf(DIFFUSION);
    expect(windowVerdict(noisy.slice(0, 6), end(noisy.slice(0, 6)), { ...soft, maxSteps: 6 }, { best: null, noise: 0.01 })?.stop).toBe("steps");
    const given: WindowOptions = { ...soft, noiseTarget: undefined };
    const v = windowVerdict(noisy.slice(0, 3), end(noisy.slice(0, 3)), given, { best: null, noise: 0.01 });
    expect(v?.stop).toBe("window");
    expect(v?.detail).toMatch(/\(3 steps\)$/);
  });
});

describe("the noise the search uses comes from repeats, never from a floor", () => {
  it("is assumed before any configuration was measured twice, and says so", () => {
    const e = noiseEstimate([], []);
    expect(e).toEqual({ noise: NOISE_FLOOR, source: "assumed", df: 0 });
    expect(describeNoise(e)).toBe("±0.5 % a trial, assumed: no configuration was measured twice");
    // the steps' own error stands in while nothing repeated, still said as assumed
    expect(noiseEstimate([0.03], [[1000]])).toEqual({ noise: 0.03, source: "assumed", df: 0 });
  });

  it("is the spread of repeats once there are some, below the floor too", () => {
    // recorded: four configurations measured twice, each pair within 0.3 %
    const repeats = [
      [1000, 1002],
      [800, 801],
      [1200, 1197],
      [640, 641],
    ];
    const e = noiseEstimate([0.0001], repeats);
    expect(e.source).toBe("repeats");
    expect(e.df).toBe(4);
    expect(e.noise).toBeLessThan(NOISE_FLOOR);
    expect(e.noise).toBeGreaterThan(0);
    expect(describeNoise(e)).toMatch(/measured: the spread of repeated configurations in this tune \(4 degrees of freedom\)$/);
    // the job: repeats of one configuration 0.90 and 2.1 samples/s
    expect(noiseEstimate([0.01], [[0.9, 2.1]]).noise).toBeGreaterThan(0.5);
  });
});

const result = (samplesPerSecond: number, stoppedBy: "window" | "stable"): TrialResult => ({
  end: "ok",
  samplesPerSecond,
  stepSeconds: [5, 5.1, 4.9],
  peakBytes: 1e9,
  frameworkPeakBytes: null,
  durationS: 40,
  oomRecoveries: 0,
  stoppedBy,
});

describe("the confirmation's noise is its pairs' spread once they have 3 degrees of freedom, with no floor", () => {
  it("reads a spread of 0.1 % as 0.1 %, not the 0.5 % floor", () => {
    // recorded shape: interleaved pairs on an idle GPU, each configuration within 0.1 % of itself
    const c = confirmSpeedup([1000, 1001, 999, 1000.5], [1100, 1101, 1099.5, 1100], [], 0.02);
    expect(c.df).toBe(6);
    expect(c.noise).toBeLessThan(NOISE_FLOOR);
    expect(c.noise).toBeGreaterThan(0);
    expect(c.high / c.low).toBeLessThan(1.01);
  });
});

describe("the search says where its noise came from", () => {
  const space: TuneSpace = { baseline: { num_workers: 0 }, others: [{ knob: "num_workers", values: [0, 2] }] };
  const run = async (rates: number[], stoppedBy: "window" | "stable", maxTrials: number): Promise<string[]> => {
    let i = 0;
    const runner = { run: (_knobs: Knobs): Promise<TrialResult> => Promise.resolve(result(rates[i++] ?? 2, stoppedBy)) };
    return (await searchKnobs(space, runner, { capBytes: 8e9, maxTrials, maxTimeS: 1e6, now: () => 0 })).notes;
  };

  it("measured, from the baseline's repeat", async () => {
    const notes = await run([0.9, 2.1], "window", 2);
    expect(notes.find((n) => n.startsWith("noise "))).toMatch(
      /^noise ±\d+ % a trial, measured: the spread of repeated configurations in this tune \(1 degree of freedom\)$/,
    );
  });

  it("assumed, when nothing was measured twice", async () => {
    const notes = await run([2], "stable", 1);
    expect(notes.find((n) => n.startsWith("noise "))).toMatch(/, assumed: no configuration was measured twice$/);
  });
});

describe("intervals that overlap", () => {
  it("overlap while the difference is within both 95 % intervals, and part with more measurements", () => {
    expect(intervalsOverlap({ mean: 1050, count: 1 }, { mean: 1000, count: 1 }, 0.02)).toBe(true);
    expect(intervalsOverlap({ mean: 1000, count: 1 }, { mean: 1050, count: 1 }, 0.02)).toBe(true);
    expect(intervalsOverlap({ mean: 1100, count: 1 }, { mean: 1000, count: 1 }, 0.02)).toBe(false);
    // 10 % apart at ±4 % a trial: overlapping once each (±8 %), apart after four measurements each (±4 %)
    expect(intervalsOverlap({ mean: 1100, count: 1 }, { mean: 1000, count: 1 }, 0.04)).toBe(true);
    expect(intervalsOverlap({ mean: 1100, count: 4 }, { mean: 1000, count: 4 }, 0.04)).toBe(false);
  });
});

describe("the budget line from trial 0's first step", () => {
  const window: WindowOptions = { warmupSteps: 1, maxSteps: 20, minSteps: 3, windowS: 10, stableWithin: 0.02, noiseTarget: 0.01 };

  it("is said only once a steady step is in", () => {
    expect(firstStepBudget({ startedAt: 90, steps: stepsOf([30], 1), window, maxTimeS: 1200 })).toBeNull();
  });

  it("says how long a trial takes on this job: start-up, warm-up, then K steps at least of the first steady step's time", () => {
    // started at 90, first step (warm-up, 30 s) began at 100, first steady step 12 s
    const line = firstStepBudget({ startedAt: 90, steps: stepsOf([30, 12], 1), window, maxTimeS: 1200 });
    // 10 s start-up + 30 s warm-up + max(3 × 12 s, min(10 s, 20 × 12 s)) = 76 s
    expect(line).toBe(
      "budget: a trial takes ≈ 76 s on this job, measured from trial 0's first step: start-up 10 s, 1 step left out (warm-up) of 30 s, then 3 steady steps at least of ≈ 12 s (until stable, 20 steps or 10 s, longer where its steps are noisy); --max-time 1200 s holds ≈ 15 trials",
    );
  });
});

describe("the time a trial is predicted to take counts the K steps trials were held to", () => {
  it("predicts 20 steps of a job whose window waited for 20, not the 10 s window", async () => {
    // recorded: trial 0's window ended after 20 steady steps of ≈ 10 s (K = 20), 8 s of start-up
    const held: TrialResult = { ...result(0.4, "window"), stepSeconds: Array.from({ length: 20 }, (_, i) => 10 + (i % 2)), durationS: 218 };
    const runner = { run: (): Promise<TrialResult> => Promise.resolve(held) };
    const space: TuneSpace = { baseline: { num_workers: 0 }, others: [] };
    const s = newSearcher(space, runner, { capBytes: 8e9, maxTrials: 4, maxTimeS: 1e6, now: () => 0, maxStepS: 10 });
    await s.ledger.run(space.baseline, "baseline", null);
    // 1.1 × (8 s start-up + 20 steps × 10.5 s), not the window's 3 + 1 steps (55 s)
    expect(s.ledger.predictDuration(space.baseline)).toBeCloseTo(1.1 * (8 + 20 * 10.5), 6);
  });

  it("counts K where the trial ended at its --steps too (nbeats beside a busy core: 20 steps of 12.7 s asked, said ≈ 81 s)", async () => {
    // as seen on the nbeats example at micro-batch 6144 beside a busy core: trial 0 stopped by its 20 steps, K = 20
    const held: TrialResult = { ...result(0.4, "window"), stoppedBy: "steps", stepSeconds: Array.from({ length: 20 }, (_, i) => 12 + (i % 2)), durationS: 280 };
    const runner = { run: (): Promise<TrialResult> => Promise.resolve(held) };
    const space: TuneSpace = { baseline: { num_workers: 0 }, others: [] };
    const s = newSearcher(space, runner, { capBytes: 8e9, maxTrials: 4, maxTimeS: 1e6, now: () => 0, maxStepS: 10 });
    await s.ledger.run(space.baseline, "baseline", null);
    // 1.1 × (30 s start-up and warm-up + 20 steps × 12.5 s), not the window's 3 + 1 steps
    expect(s.ledger.predictDuration(space.baseline)).toBeCloseTo(1.1 * 280, 6);
  });
});

describe("what an engineer staring at the trial table sees of the noise", () => {
  it("each trial's line says how close its own mean is", () => {
    const line = renderTrialLine(1, 6, "num_workers=2", { ...result(2, "window"), stepSeconds: DIFFUSION, measuredS: 130 });
    expect(line).toMatch(/\(window, 12 steps in 130\.0 s; its mean within ±\d+(\.\d)? %/);
  });

  it("the closing table says where the noise came from", () => {
    const record: TuneRecord = {
      schema: "brim.tune/v1",
      id: "20261129-000000-abcd",
      command: ["python", "train.py"],
      cwd: "/p",
      bindings: [],
      cap_bytes: 2 ** 30,
      cap_scope: "ram",
      effective_batch: null,
      started_at: "",
      ended_at: "",
      stop_reason: "converged",
      strategy: "brim",
      notes: ["noise ±31 % a trial, measured: the spread of repeated configurations in this tune (1 degree of freedom)"],
      memory_line: null,
      trials: [],
      winner: null,
    };
    expect(renderTuneTable(record, 200)).toContain("noise ±31 % a trial, measured: the spread of repeated configurations in this tune (1 degree of freedom)");
  });
});
