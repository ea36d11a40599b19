import { describe, expect, it } from "vitest";
import { loaderWaveSteps, windowVerdict, type StepTime } from "../../src/tune/window.ts";

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
