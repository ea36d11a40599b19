import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { searchKnobs, type Knobs, type TuneSpace } from "../../src/tune/search.ts";
import { ranAsGiven } from "../../src/tune/strategies/ledger.ts";
import { compareThroughput } from "../../src/tune/strategies/noise.ts";
import { DEFAULT_ORACLE, FakeClock, SimulatedRunner, type OracleSpec } from "./oracle.ts";
import { scaled } from "../helpers/time.ts";

const MiB = 2 ** 20;

/** A random job: linear memory with a non-negative fixed part, a speed curve with or without a knee, and random knobs. */
const job = fc.record({
  baseShare: fc.double({ min: 0.01, max: 0.85, noNaN: true }),
  perSampleShare: fc.double({ min: 1e-4, max: 0.08, noNaN: true }),
  overheadS: fc.double({ min: 0.001, max: 0.1, noNaN: true }),
  perSampleS: fc.double({ min: 1e-5, max: 0.003, noNaN: true }),
  knee: fc.oneof(fc.constant(Infinity), fc.integer({ min: 4, max: 400 })),
  penalty: fc.double({ min: 0, max: 2, noNaN: true }),
  baseline: fc.integer({ min: 1, max: 96 }),
  effective: fc.option(fc.constantFrom(60, 64, 96, 240, 256), { nil: undefined }),
  others: fc.boolean(),
  stepNoise: fc.constantFrom(0, 0.02, 0.05),
  trialNoise: fc.constantFrom(0, 0.01),
  maxTrials: fc.integer({ min: 1, max: 30 }),
  seed: fc.integer({ min: 1, max: 10_000 }),
});

type Job = typeof job extends fc.Arbitrary<infer T> ? T : never;

function setUp(j: Job): { spec: OracleSpec; cap: number; space: TuneSpace } {
  const cap = 1024 * MiB;
  const spec: OracleSpec = {
    ...DEFAULT_ORACLE,
    baseBytes: j.baseShare * cap,
    perSampleBytes: j.perSampleShare * cap,
    overheadS: j.overheadS,
    perSampleS: j.perSampleS,
    knee: j.knee,
    penalty: j.penalty,
  };
  const baseline: Knobs = j.effective === undefined ? { batch_size: j.baseline } : { batch_size: 4, accumulation: j.effective / 4 };
  const space: TuneSpace = {
    baseline: j.others ? { ...baseline, precision: "fp32" } : baseline,
    microBatch: { knob: "batch_size" },
    ...(j.effective === undefined ? {} : { accumulation: { knob: "accumulation" }, effectiveBatch: j.effective }),
    others: j.others
      ? [
          { knob: "precision", values: ["fp32", "bf16-mixed"] },
          { knob: "num_workers", values: [0, 2, 4] },
        ]
      : [],
  };
  return { spec, cap, space };
}

describe("searchKnobs, for any job", () => {
  it(
    "never starts a trial it predicted over the cap; with linear memory, none runs over it once one ran",
    async () => {
      await fc.assert(
        fc.asyncProperty(job, async (j) => {
          const { spec, cap, space } = setUp(j);
          const clock = new FakeClock();
          const runner = new SimulatedRunner(spec, { capBytes: cap, clock, seed: j.seed, stepNoise: j.stepNoise, trialNoise: j.trialNoise });
          const outcome = await searchKnobs(space, runner, { capBytes: cap, maxTrials: j.maxTrials, maxTimeS: 1e6, now: clock.now });
          expect(outcome.trials.length).toBeLessThanOrEqual(j.maxTrials);
          for (const t of outcome.trials) {
            if (t.predictedPeakBytes !== null && t.predictedPeakBytes !== undefined) expect(t.predictedPeakBytes).toBeLessThanOrEqual(cap);
          }
          const firstOk = runner.calls.findIndex((c) => c.result.end === "ok");
          if (firstOk >= 0) {
            const over = runner.calls.slice(firstOk).filter((c) => c.truePeak > cap && c.knobs.precision === runner.calls[firstOk]?.knobs.precision);
            expect(over.map((c) => c.purpose)).toEqual([]);
          }
        }),
        { numRuns: 150 },
      );
      // 150 simulated tunes: seconds on a loaded 2-core box, past vitest's 5 s default
    },
    scaled(120_000),
  );

  it(
    "the winner ran as given, and no other configuration measured clearly faster",
    async () => {
      await fc.assert(
        fc.asyncProperty(job, async (j) => {
          const { spec, cap, space } = setUp(j);
          const clock = new FakeClock();
          const runner = new SimulatedRunner(spec, { capBytes: cap, clock, seed: j.seed, stepNoise: j.stepNoise, trialNoise: j.trialNoise });
          const outcome = await searchKnobs(space, runner, { capBytes: cap, maxTrials: j.maxTrials, maxTimeS: 1e6, now: clock.now });
          const okTrials = outcome.trials.filter((t) => ranAsGiven(t.result) && t.result.samplesPerSecond !== null && (t.result.peakBytes ?? 0) <= 0.98 * cap);
          if (outcome.bestIndex === null) {
            expect(outcome.best).toBeNull();
            expect(okTrials).toEqual([]);
            return;
          }
          const winner = outcome.trials[outcome.bestIndex];
          expect(winner).toBeDefined();
          if (winner === undefined) throw new Error("bestIndex out of range");
          expect(ranAsGiven(winner.result)).toBe(true);
          expect(outcome.best?.knobs).toEqual(winner?.knobs);
          const byConfig = new Map<string, number[]>();
          for (const t of okTrials) {
            const key = JSON.stringify(Object.entries(t.knobs).sort());
            byConfig.set(key, [...(byConfig.get(key) ?? []), t.result.samplesPerSecond ?? 0]);
          }
          const best = { mean: outcome.best?.samplesPerSecond ?? 0, count: outcome.best?.measurements ?? 1 };
          for (const values of byConfig.values()) {
            const other = { mean: values.reduce((a, b) => a + b, 0) / values.length, count: values.length };
            expect(compareThroughput(other, best, outcome.noise)).not.toBe("better");
          }
        }),
        {
          numRuns: 150,
          // found by this property on a fresh clone: the baseline peaks at the cap's 2 % margin, bf16 ties
          // it with room to spare, and the 2-trial budget ends there: bf16 is the safe winner, not nothing
          examples: [
            [
              {
                ...{ baseShare: 0.8427136439303012, perSampleShare: 0.03432158901742471, overheadS: 0.001, perSampleS: 0.00001, knee: 4, penalty: 0 },
                ...{ baseline: 1, effective: 60, others: true, stepNoise: 0, trialNoise: 0, maxTrials: 2, seed: 1 },
              },
            ],
          ],
        },
      );
      // 150 simulated tunes: seconds on a loaded 2-core box, past vitest's 5 s default
    },
    scaled(120_000),
  );
});
