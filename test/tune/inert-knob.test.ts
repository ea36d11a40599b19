import { describe, expect, it } from "vitest";
import type { TrialResult } from "../../src/tune/search.ts";
import { samplesMismatch } from "../../src/tune/effective.ts";

const ok = (samplesPerStep: number): TrialResult => ({
  end: "ok",
  samplesPerSecond: 100,
  stepSeconds: [0.1, 0.1, 0.1],
  peakBytes: 1,
  frameworkPeakBytes: null,
  durationS: 2,
  oomRecoveries: 0,
  samplesPerStep,
});

describe("a batch-size knob the job reads and does not train on", () => {
  it("the same samples per step whatever the knob asked: the knob is said to look inert, not a count that moved the wrong way", () => {
    const base = { knobs: { batch_size: 256 }, result: ok(64) };
    expect(samplesMismatch(base, { knobs: { batch_size: 1024 }, result: ok(64) })).toMatch(
      /^samples per step did not follow the effective batch: 256 × 1 → 1024 × 1 \(×4\.00\) but the job ran 64 → 64 samples per step, the same batch: the batch_size knob looks inert/,
    );
    // a count that moved, but not as asked, is the other finding
    expect(samplesMismatch(base, { knobs: { batch_size: 1024 }, result: ok(32) })).toMatch(/counts something else as samples/);
    expect(samplesMismatch(base, { knobs: { batch_size: 1024 }, result: ok(32) })).not.toMatch(/inert/);
    // followed: nothing to say
    expect(samplesMismatch({ knobs: { batch_size: 64 }, result: ok(64) }, { knobs: { batch_size: 256 }, result: ok(256) })).toBeNull();
  });
});
