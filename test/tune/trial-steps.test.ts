import { describe, expect, it } from "vitest";
import { searchKnobs } from "../../src/tune/search.ts";
import { trialNoise } from "../../src/tune/strategies/noise.ts";
import type { Knobs, TrialResult, TuneSpace } from "../../src/tune/types.ts";
import { MIN_STEADY_STEPS, trialTimeText, windowVerdict, type StepTime } from "../../src/tune/window.ts";

const options = { warmupSteps: 3, maxSteps: 40, minSteps: 3, windowS: 10, stableWithin: 0.02 };
// recorded shape: a diffusion trainer on a busy 2-core machine, steps of 5 to 18 s
const slow = [11.2, 17.8, 6.1, 5.4, 12.9].map((seconds, i, all) => ({
  t: 100 + all.slice(0, i + 1).reduce((a, b) => a + b, 0),
  samples: 4,
  seconds,
  warmup: false,
}));

describe("trials sized by steps: no decision on fewer than K steady steps", () => {
  it("lets the 10 s window end a trial of 18 s steps only after K steady steps", () => {
    const at = (n: number): StepTime[] => slow.slice(0, n);
    expect(windowVerdict(at(1), (at(1).at(-1) as StepTime).t, options, { best: null, noise: 0.01 })).toBeNull();
    expect(windowVerdict(at(2), (at(2).at(-1) as StepTime).t, options, { best: null, noise: 0.01 })).toBeNull();
    const v = windowVerdict(at(MIN_STEADY_STEPS), (at(MIN_STEADY_STEPS).at(-1) as StepTime).t, options, { best: null, noise: 0.01 });
    expect(v?.stop).toBe("window");
    expect(v?.detail).toMatch(/\(3 steps\)/);
  });

  it("stops a trial as clearly slower on its rate only after K steady steps", () => {
    const long = { ...options, windowS: 600 };
    const two = slow.slice(0, 2);
    expect(windowVerdict(two, (two.at(-1) as StepTime).t, long, { best: 10, noise: 0.01 })).toBeNull();
    const three = slow.slice(0, 3);
    expect(windowVerdict(three, (three.at(-1) as StepTime).t, long, { best: 10, noise: 0.01 })?.stop).toBe("slower");
  });

  it("says how long a trial takes on this job from trial 0's first step", () => {
    expect(trialTimeText({ fixedCostS: 4.2, warmupSteps: 3, stepSeconds: [6, 12.9, 17.8] }, 98.4)).toBe(
      "a trial takes ≈ 98 s on this job: start-up 4.2 s before its first step, 3 warm-up steps left out, then 20 steady steps at least (K: 3 steps measured their mean within ±28.0 %; 20 is the most K asks, short of ±1 %), of ≈ 12.9 s each here",
    );
  });
});

const result = (samplesPerSecond: number, stoppedBy: "window" | "stable"): TrialResult => ({
  end: "ok",
  samplesPerSecond,
  stepSeconds: [5, 6, 7],
  peakBytes: 1e9,
  frameworkPeakBytes: null,
  durationS: 40,
  oomRecoveries: 0,
  stoppedBy,
  fixedCostS: 4,
  warmupSteps: 3,
});

describe("noise measured, not assumed", () => {
  it("measures a baseline its window ended (never stable) again, and its noise is the spread of the two", async () => {
    // recorded: trial 0 read 0.90 samples/s, the same settings later 1.85–2.42
    const rates = [0.9, 2.1];
    const ran: { knobs: Knobs; purpose: string }[] = [];
    const runner = {
      run: (knobs: Knobs, purpose: string): Promise<TrialResult> => {
        ran.push({ knobs, purpose });
        return Promise.resolve(result(rates[ran.length - 1] ?? 2, "window"));
      },
    };
    const space: TuneSpace = { baseline: { num_workers: 0 }, others: [{ knob: "num_workers", values: [0, 2] }] };
    const outcome = await searchKnobs(space, runner, { capBytes: 8e9, maxTrials: 2, maxTimeS: 1e6, now: () => 0 });
    expect(ran.map((r) => r.knobs.num_workers)).toEqual([0, 0]);
    expect(ran[1]?.purpose).toMatch(/^re-measure: your configuration/);
    // the search's noise is the spread of its own repeats, far above the 0.5 % floor
    expect(outcome.noise).toBeCloseTo(trialNoise([], [[0.9, 2.1]]), 10);
    expect(outcome.noise).toBeGreaterThan(0.3);
    expect(outcome.notes.some((n) => /^a trial takes ≈ \d+ s on this job: start-up 4\.0 s/.test(n))).toBe(true);
  });

  it("does not repeat a baseline that measured stable for its noise", async () => {
    const purposes: string[] = [];
    const runner = {
      run: (_knobs: Knobs, purpose: string): Promise<TrialResult> => {
        purposes.push(purpose);
        return Promise.resolve(result(2, "stable"));
      },
    };
    const space: TuneSpace = { baseline: { num_workers: 0 }, others: [{ knob: "num_workers", values: [0, 2] }] };
    await searchKnobs(space, runner, { capBytes: 8e9, maxTrials: 2, maxTimeS: 1e6, now: () => 0 });
    expect(purposes.some((p) => p.includes("never stable"))).toBe(false);
  });
});
