import { describe, expect, it } from "vitest";
import { inRateUnit, rateLabel, rateOf, unseenSamples, type StepTime } from "../../src/tune/window.ts";

const step = (samples: number | null, batches: number | null, seconds = 0.5): StepTime => ({ t: 1, samples, seconds, warmup: false, batches });

describe("the unit a trial's rate is counted in", () => {
  it("keeps samples where steps say them", () => {
    const { steps, unit } = inRateUnit([step(32, 1), step(32, 1)]);
    expect(unit).toBe("samples");
    expect(rateOf(steps)).toBe(64);
  });

  it("keeps counted steps with no samples as batches/s, else steps/s — never no rate", () => {
    const batches = inRateUnit([step(null, 2), step(null, 2)]);
    expect(batches.unit).toBe("batches");
    expect(rateOf(batches.steps)).toBe(4);
    const steps = inRateUnit([step(null, null), step(null, 1)]);
    expect(steps.unit).toBe("steps");
    expect(rateOf(steps.steps)).toBe(2);
    expect(rateOf([step(null, 2), step(null, 2)])).toBeNull();
  });

  it("says what it compared and what brim could not see", () => {
    expect(rateLabel(undefined)).toBe("samples/s");
    expect(rateLabel("steps")).toBe("steps/s");
    expect(unseenSamples(undefined)).toBeNull();
    expect(unseenSamples("steps")).toMatch(
      /^brim compared steps\/s: no step of the job said its samples .*valid while a knob does not change the samples of a step/,
    );
  });
});
