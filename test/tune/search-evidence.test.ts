import { describe, expect, it } from "vitest";
import { evidenceOf, oneWorkerGain, rankByEvidence } from "../../src/tune/evidence.ts";
import { searchKnobs, type TuneSpace } from "../../src/tune/search.ts";
import type { TrialResult } from "../../src/tune/types.ts";
import { DEFAULT_ORACLE, FakeClock, oracleBest, SimulatedRunner, throughput, type OracleSpec } from "./oracle.ts";

const MiB = 2 ** 20;

/** A trial that ran as given, 100 samples/s in fp32, waiting for data `wait` of its step time. */
const okTrial = (wait: number): TrialResult => ({
  end: "ok",
  samplesPerSecond: 100,
  stepSeconds: [0.1],
  peakBytes: null,
  frameworkPeakBytes: null,
  durationS: 1,
  oomRecoveries: 0,
  dataWaitShare: wait,
  precision: "fp32",
});

async function run(
  spec: OracleSpec,
  space: TuneSpace,
  capBytes: number,
  maxTrials = 12,
): Promise<{ runner: SimulatedRunner; outcome: Awaited<ReturnType<typeof searchKnobs>> }> {
  const clock = new FakeClock();
  const runner = new SimulatedRunner(spec, { capBytes, clock, seed: 3, stepNoise: 0.01 });
  const outcome = await searchKnobs(space, runner, { capBytes, maxTrials, maxTimeS: 1e6, now: clock.now });
  return { runner, outcome };
}

describe("the search spends trials where the evidence says the most is to gain", () => {
  it("a data-starved loop: loader workers first, named by the data wait, and the winner has them", async () => {
    const spec: OracleSpec = { ...DEFAULT_ORACLE, dataS: 0.002 };
    const space: TuneSpace = {
      baseline: { batch_size: 16, num_workers: 0 },
      microBatch: { knob: "batch_size" },
      others: [{ knob: "num_workers", values: [0, 1, 2, 4] }],
    };
    const { runner, outcome } = await run(spec, space, 256 * MiB);
    expect(runner.calls[1]?.knobs.num_workers).not.toBe(0);
    expect(runner.calls[1]?.purpose).toMatch(/the loop waits for data \d+ % of step time/);
    expect(Number(outcome.best?.knobs.num_workers)).toBeGreaterThan(0);
    // past a value kept, the walk says the wait left there, not the baseline's again
    const onward = runner.calls.filter((c) => /^knob num_workers=\d+: against num_workers=[1-9]/.test(c.purpose));
    expect(onward.length).toBeGreaterThan(0);
    for (const c of onward) expect(c.purpose).toMatch(/— num_workers=\d+ kept; the loop still waits for data \d+(\.\d)? % of step time there$/);
    const best = oracleBest(spec, space, 256 * MiB, 512);
    expect(throughput(spec, outcome.best?.knobs ?? {}) / (best?.samplesPerSecond ?? 1)).toBeGreaterThanOrEqual(0.9);
  });

  it("fp32 on a GPU with tensor cores: precision first, named by the precision in force, and the winner runs 16-bit", async () => {
    const spec: OracleSpec = { ...DEFAULT_ORACLE, precisions: { ...DEFAULT_ORACLE.precisions, "bf16-mixed": { memory: 0.5, extraBytes: 2 * MiB, time: 0.3 } } };
    const space: TuneSpace = {
      baseline: { batch_size: 16, precision: "fp32" },
      microBatch: { knob: "batch_size" },
      others: [{ knob: "precision", values: ["fp32", "fp16-mixed", "bf16-mixed", "tf32"] }],
    };
    const { runner, outcome } = await run(spec, space, 256 * MiB, 14);
    expect(runner.calls[1]?.knobs.precision).not.toBe("fp32");
    expect(runner.calls[1]?.purpose).toMatch(/runs fp32 on a GPU with tensor cores/);
    expect(outcome.best?.knobs.precision).toBe("bf16-mixed");
  });

  it("a loop that does not wait for data spends no trial on loader workers", async () => {
    const space: TuneSpace = {
      baseline: { batch_size: 16, num_workers: 0 },
      microBatch: { knob: "batch_size" },
      others: [{ knob: "num_workers", values: [0, 1, 2] }],
    };
    // a data wait measured, and negligible
    const { runner, outcome } = await run({ ...DEFAULT_ORACLE, dataS: 1e-7 }, space, 64 * MiB);
    expect(runner.calls.every((c) => c.knobs.num_workers === 0)).toBe(true);
    expect(outcome.notes.join("\n")).toMatch(/num_workers not tried: the loop waits for data only 0 % of step time/);
  });

  it("ranks by expected gain", () => {
    const evidence = evidenceOf(okTrial(0.6), { num_workers: 0 }, 1e9);
    const { ranked } = rankByEvidence(
      [
        { knob: "precision", values: ["fp32", "bf16-mixed"] },
        { knob: "num_workers", values: [0, 1, 2] },
      ],
      evidence,
      { num_workers: 0, precision: "fp32" },
    );
    expect(ranked.map((r) => r.knob)).toEqual(["num_workers", "precision"]);
  });

  it("skips one worker from 0 when the loop mostly waits: it could only hide the compute share", () => {
    const starved = evidenceOf(okTrial(0.97), { num_workers: 0 }, 1e9);
    const [walk] = rankByEvidence([{ knob: "num_workers", values: [0, 1, 2, 4, 8] }], starved, { num_workers: 0 }).ranked;
    expect(walk?.values).toEqual([0, 2, 4, 8]);
    expect(walk?.why).toMatch(/one worker would only overlap the loading with the 3 % of compute/);
    const balanced = evidenceOf(okTrial(0.6), { num_workers: 0 }, 1e9);
    expect(rankByEvidence([{ knob: "num_workers", values: [0, 1, 2] }], balanced, { num_workers: 0 }).ranked[0]?.values).toEqual([0, 1, 2]);
    const onlyOne = rankByEvidence([{ knob: "num_workers", values: [0, 1] }], starved, { num_workers: 0 }).ranked[0];
    expect(onlyOne?.values).toEqual([0, 1]);
    expect(oneWorkerGain(0.97)).toBeCloseTo(0.0309, 3);
    expect(oneWorkerGain(0.5)).toBe(1);
  });

  it("skips one worker when the most it can gain is within three times the noise measured so far", () => {
    // recorded: the first command on 2 busy cores, trial 0 and its re-measure ±12.7 % apart, 79 % data wait
    const waiting = evidenceOf(okTrial(0.79), { num_workers: 0 }, 1e9);
    const values = [0, 1, 2, 4, 8];
    const noisy = rankByEvidence([{ knob: "num_workers", values }], waiting, { num_workers: 0 }, 0.127).ranked[0];
    expect(oneWorkerGain(0.79)).toBeCloseTo(0.266, 3);
    expect(noisy?.values).toEqual([0, 2, 4, 8]);
    expect(noisy?.why).toMatch(/at most \+27 %, within 3× this job's noise of ±13 % a trial\), so the walk starts at 2/);
    // a quiet machine can tell +27 % apart: one worker is tried
    expect(rankByEvidence([{ knob: "num_workers", values }], waiting, { num_workers: 0 }, 0.03).ranked[0]?.values).toEqual(values);
    expect(rankByEvidence([{ knob: "num_workers", values }], waiting, { num_workers: 0 }).ranked[0]?.values).toEqual(values);
  });
});
