import { describe, expect, it } from "vitest";
import { loaderQueueSteps, loaderWaveSteps, splitWarmup, steadyMask, windowVerdict, type StepTime } from "../../src/tune/window.ts";

// Recorded shape (the first-run example, 2 loader workers, reads of 1.6 s a batch): batches come in
// waves of two, both ready at once, then the wait for the next wave; the first steady steps after the
// warm-up read a part of a wave.
const options = { warmupSteps: 1, maxSteps: 8, minSteps: 3, windowS: 10, stableWithin: 0.02 };
/** Steps of `seconds` each, the first flagged warm-up. */
function stepsOf(seconds: number[]): StepTime[] {
  let t = 100;
  return seconds.map((s, i) => ({ t: (t += s), samples: 16, seconds: s, warmup: i === 0 }));
}
/** `n` steps from workers: the first batch of each wave after the wave's wait, the others at once. */
const waves = (workers: number, period: number, n: number): StepTime[] =>
  stepsOf(Array.from({ length: n }, (_, i) => (i % workers === 0 ? period - 0.05 * (workers - 1) : 0.05)));

describe("loader workers: no decision on less than two waves of batches", () => {
  it("two waves a worker", () => {
    expect(loaderWaveSteps(2)).toBe(4);
    expect(loaderWaveSteps(8)).toBe(16);
    expect(loaderWaveSteps(0)).toBe(0);
    expect(loaderWaveSteps("auto")).toBe(0);
  });

  it("a trial of 2 workers is not stopped as clearly slower on the first 3 steady steps, which end on a wait", () => {
    // the warm-up took the first wave's second batch; the steady steps: a wait, a ready batch, a wait
    const steps = stepsOf([0.05, 1.55, 0.05, 1.55]);
    const now = (steps.at(-1) as StepTime).t;
    const best = 20; // samples/s of the best so far: what 2 workers deliver here (2 batches of 16 in 1.6 s)
    const without = windowVerdict(steps, now, options, { best, noise: 0.01 });
    expect(without?.stop).toBe("slower");
    expect(windowVerdict(steps, now, { ...options, waveSteps: loaderWaveSteps(2) }, { best, noise: 0.01 })).toBeNull();
  });

  it("two whole waves measure the workers' rate, and then the trial may end", () => {
    const steps = waves(2, 1.6, 1 + 4 * 3);
    const v = windowVerdict(steps, (steps.at(-1) as StepTime).t, { ...options, maxSteps: 12, waveSteps: 4 }, { best: 10, noise: 0.01 });
    expect(v?.stop).toBe("steps");
  });
});

// Recorded shape (the first-run example, 8 workers, 16 reads of 100 ms a batch, on 2 busy cores):
// while the first step ran (9.7 s: the workers' start), the 8 workers filled their queue of 2 batches
// each; the main process then read those 16 at its own speed (≈ 50 ms a step), and only then did the
// steps show what the workers deliver: a wave of 8 batches per 1.6 s.
const queuedThenWaves = (): StepTime[] => stepsOf([9.7, ...Array.from({ length: 15 }, () => 0.05), ...waves(8, 1.6, 32).map((s) => s.seconds)]);

describe("loader workers: the batches queued during the start are not the workers' rate", () => {
  it("prefetch_factor batches a worker, PyTorch's default 2", () => {
    expect(loaderQueueSteps(8, null)).toBe(16);
    expect(loaderQueueSteps(8, undefined)).toBe(16);
    expect(loaderQueueSteps(4, 4)).toBe(16);
    expect(loaderQueueSteps(0, 2)).toBe(0);
    expect(loaderQueueSteps("auto", 2)).toBe(0);
  });

  it("the queued steps are left out, and the rate measured is the waves'", () => {
    const steps = queuedThenWaves();
    const queue = loaderQueueSteps(8, 2);
    const { warmup, queued, steady } = splitWarmup(steps, 1, queue);
    expect([warmup, queued, steady.length]).toEqual([1, 15, 32]);
    expect(steadyMask(steps, queue).filter(Boolean)).toHaveLength(32);
    const rate = (list: StepTime[]): number => list.reduce((a, s) => a + (s.samples ?? 0), 0) / list.reduce((a, s) => a + s.seconds, 0);
    // two whole waves of 8 batches of 16 per 1.6 s: 80 samples/s
    expect(rate(steady)).toBeCloseTo(80, 5);
    // counted from the end of the warm-up, 32 steps read faster; the shorter the trial, the more so
    expect(rate(splitWarmup(steps, 1).steady.slice(0, 32))).toBeGreaterThan(1.2 * 80);
    expect(rate(splitWarmup(steps, 1).steady.slice(0, 16))).toBeGreaterThan(1.5 * 80);
  });

  it("no decision before two waves past the queue", () => {
    const steps = queuedThenWaves().slice(0, 1 + 15 + 15);
    const window = { ...options, maxSteps: 8, waveSteps: loaderWaveSteps(8), queueSteps: loaderQueueSteps(8, 2) };
    expect(windowVerdict(steps, (steps.at(-1) as StepTime).t, window, { best: null, noise: 0.01 })).toBeNull();
    const all = queuedThenWaves();
    expect(windowVerdict(all, (all.at(-1) as StepTime).t, window, { best: null, noise: 0.01 })?.stop).toBe("steps");
  });
});
