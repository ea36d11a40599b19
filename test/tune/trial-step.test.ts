import { describe, expect, it } from "vitest";
import { rateOf, trialStep } from "../../src/tune/window.ts";

// One rule for a step as a trial measures it, live (the channel's step message) and from the run record
// (its step entry): the same seconds, samples and batches from either.
describe("a trial's step, live or recorded", () => {
  const message = { type: "step", t: 10, pid: 7, step: 3, samples: null, wait_s: 0.1, compute_s: 0.4, warmup: false, accumulation: 2, source: "attach" };
  const entry = { t: 10, pid: 7, step: 3, samples: null, wait_s: 0.1, compute_s: 0.4, warmup: false, micro_batch: 16, accumulation: 2, source: "attach" };

  it("is the same StepTime from the message and from the record's entry", () => {
    expect(trialStep(message, { batch_size: 16 })).toEqual(trialStep(entry, { batch_size: 16 }));
    expect(trialStep(entry, { batch_size: 16 })).toEqual({ t: 10, samples: 32, seconds: 0.5, warmup: false, batches: 2, printed: false });
  });

  it("keeps what the job reported, and counts a step without timing as no time", () => {
    expect(trialStep({ ...entry, samples: 24 }, { batch_size: 16 }).samples).toBe(24);
    expect(trialStep({ t: 1, wait_s: null, compute_s: null }, {})).toMatchObject({ samples: null, seconds: 0, batches: null });
    expect(rateOf([trialStep(entry, { batch_size: 16 }), trialStep({ ...entry, t: 11 }, { batch_size: 16 })])).toBeCloseTo(64, 9);
  });
});
