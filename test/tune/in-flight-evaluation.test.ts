// A step still running bounds a trial's throughput from above only if that step will count. A job that
// evaluates inside its steps (the attach flags such a step warm-up: left out of the measurement) may be
// in its evaluation pass: its time bounds nothing, and the trial must not be stopped as clearly slower
// on it. Seen for real (test/tune/eval-memory.e2e.test.ts beside a busy core): trial 1 at batch 64, one
// steady step in, its first evaluation still running after 1.2 s, was stopped "at most 103.6 samples/s
// (a step of 64 samples still running after 1.2 s), below the best so far (3418.3)" before the cap it
// was to show tripped. Simulated data only: steps and the clock come in, a verdict comes out.
import { describe, expect, it } from "vitest";
import { contextFor, type Measured } from "../../src/tune/trial-context.ts";
import type { TrialResult } from "../../src/tune/types.ts";
import { windowVerdict, type StepTime } from "../../src/tune/window.ts";

const options = { warmupSteps: 1, maxSteps: 20, minSteps: 3, windowS: 2, stableWithin: 0.02 };
/** steps of these seconds, the first flagged warm-up, and those at `left` flagged too (an evaluation pass inside them) */
const steps = (seconds: number[], samples: number, left: number[] = []): StepTime[] => {
  let t = 100;
  return seconds.map((s, i) => ({ t: (t += s), samples, seconds: s, warmup: i === 0 || left.includes(i) }));
};
const trial0 = (evaluation: TrialResult["evaluation"]): Measured => [
  {
    knobs: { batch_size: 8 },
    result: {
      end: "ok",
      samplesPerSecond: 3418.3,
      stepSeconds: [0.002, 0.0023, 0.0025],
      peakBytes: null,
      frameworkPeakBytes: null,
      durationS: 9,
      oomRecoveries: 0,
      evaluation,
    },
  },
];

describe("a step in flight that may be an evaluation pass bounds nothing", () => {
  // trial 1 at batch 64: its warm-up step, one steady step of 3 ms, then its first evaluation pass runs
  const large = steps([0.23, 0.003], 64);
  const last = (large.at(-1) as StepTime).t;

  it("without evidence of evaluation, a long step in flight stops the trial as clearly slower (the bound)", () => {
    const verdict = windowVerdict(large, last + 1.3, options, { best: 3418.3, noise: 0.02 });
    expect(verdict?.stop).toBe("slower");
    expect(verdict?.bound).toBeLessThan(110);
  });

  it("once an earlier trial saw the job evaluate, no step in flight stops it, however long", () => {
    const context = contextFor(trial0({ ran: true, where: "eval_spill.py:31" }), { batch_size: 64 }, 1);
    expect(context).toMatchObject({ best: 3418.3, evaluates: true });
    for (const after of [1.3, 5, 60]) expect(windowVerdict(large, last + after, options, context)).toBeNull();
  });

  it("nor once this trial has left out a step past its first steady one (an evaluation pass, a recompile)", () => {
    // steady, evaluated (flagged warm-up), steady, then a step running for 60 s
    const evaluated = steps([0.23, 0.003, 0.9, 0.003], 64, [2]);
    const end = (evaluated.at(-1) as StepTime).t;
    expect(windowVerdict(evaluated, end + 60, options, { best: 3418.3, noise: 0.02 })).toBeNull();
  });

  it("a trial slower over its own finished steps is still stopped: only the bound of a step in flight is off", () => {
    const slow = steps([0.5, 0.4, 0.3, 0.5], 64);
    const verdict = windowVerdict(slow, (slow.at(-1) as StepTime).t, options, { best: 3418.3, noise: 0.02, evaluates: true });
    expect(verdict?.stop).toBe("slower");
    expect(verdict?.rate).toBeCloseTo(160, 6);
  });

  it("a job no trial saw evaluate is told nothing of evaluation", () => {
    expect(contextFor(trial0(null), { batch_size: 64 }, 1).evaluates).toBeUndefined();
    expect(contextFor(trial0({ ran: false, where: "eval_spill.py:31" }), { batch_size: 64 }, 1).evaluates).toBeUndefined();
  });
});
