import { describe, expect, it } from "vitest";
import type { StepEntry } from "../../src/record/timeline/index.ts";
import { parityRecord, stepLosses, type ParitySide } from "../../src/tune/parity.ts";

// A trainer that warms up (seen on ultralytics' `yolo classify train`): its learning rate starts at 0
// and its accumulation ramps from 1 towards nominal-batch / batch over the first iterations. The first
// steps a trial measures then show neither the rate it warms up to nor the effective batch it settles at.
const step = (i: number, accumulation: number, micro = 16): StepEntry =>
  ({ step: i, loss: 1.1 + 0.01 * i, precision: "fp32", micro_batch: micro, accumulation }) as unknown as StepEntry;

function side(trial: number, micro: number, accumulations: number[], lr: number[]): ParitySide {
  const { losses, accumulationSeen } = stepLosses(accumulations.map((a, i) => step(i, a, micro)));
  return {
    trial,
    knobs: { batch_size: micro },
    losses,
    precision: "fp32",
    effectiveBatch: micro * (accumulations[0] ?? 1),
    microBatch: micro,
    facts: { lr, batchStatLayers: {} },
    accumulationSeen,
  };
}

describe("loss parity on a job that warms up its learning rate and accumulation", () => {
  it("reads the accumulations a run's steps reported: a ramp where they only rise, none where they hold or an epoch ends short", () => {
    expect(stepLosses([step(0, 1), step(1, 1), step(2, 2), step(3, 3)]).accumulationSeen).toEqual([1, 3]);
    expect(stepLosses([step(0, 4), step(1, 4)]).accumulationSeen).toBeNull();
    // the Hugging Face Trainer's last step of an epoch takes the micro-batches left: no ramp
    expect(stepLosses([step(0, 4), step(1, 4), step(2, 2), step(3, 4)]).accumulationSeen).toBeNull();
    expect(stepLosses([step(0, 4), step(1, 4), step(2, 2)]).accumulationSeen).toBeNull();
  });

  it("a rate of 0 at the first step is a warm-up, not a rate to scale; a ramped accumulation is said, with the verdict's scope", () => {
    const yours = side(5, 16, [...Array<number>(15).fill(1), 2], [0, 0, 0]);
    const winner = side(6, 64, Array<number>(4).fill(1), [0, 0, 0]);
    const parity = parityRecord(yours, winner);
    expect(parity.verdict).toBe("batch_changed");
    expect(parity.line).toMatch(/^EFFECTIVE BATCH CHANGES in the steps measured \(the job ramps its accumulation: below\): 16 → 64/);
    expect(parity.evidence.map((e) => e.kind)).toEqual(["lr_warmup", "accumulation_ramp"]);
    expect(parity.evidence[0]?.text).toMatch(/^learning rate 0 at the first optimizer step in both runs \(a warm-up from 0\)/);
    expect(parity.evidence.map((e) => e.text).join("\n")).not.toContain("scale it (linearly");
    expect(parity.evidence[1]?.text).toMatch(/^accumulation 1 to 2 within your configuration's run: the job changes it as it runs/);
  });

  it("a rate that is 0 on one side only is not a warm-up of both: the rates are compared as before", () => {
    const parity = parityRecord(side(1, 16, [1, 1], [0.1]), side(2, 64, [1, 1], [0]));
    expect(parity.evidence.map((e) => e.kind)).toEqual(["lr"]);
  });
});
