import { describe, expect, it } from "vitest";
import { InputError } from "../../src/errors/index.ts";
import {
  doublingBisection,
  searchKnobs,
  type Knobs,
  type SearchOptions,
  type SearchOutcome,
  type TrialResult,
  type TrialRunner,
  type TuneSpace,
} from "../../src/tune/search.ts";
import { DEFAULT_ORACLE, FakeClock, oracleBest, peakBytes, SimulatedRunner, throughput, type OracleSpec, type SimulatedOptions } from "./oracle.ts";
import { SHAPES, type Shape } from "./oracle-shapes.ts";

const MiB = 2 ** 20;

interface Run {
  outcome: SearchOutcome;
  runner: SimulatedRunner;
  clock: FakeClock;
}

async function search(
  spec: OracleSpec,
  capBytes: number,
  space: TuneSpace,
  sim: Partial<SimulatedOptions> = {},
  options: Partial<SearchOptions> = {},
  strategy = searchKnobs,
): Promise<Run> {
  const clock = new FakeClock();
  const runner = new SimulatedRunner(spec, { capBytes, clock, ...sim });
  const outcome = await strategy(space, runner, { capBytes, maxTrials: 40, maxTimeS: 1e6, now: clock.now, ...options });
  return { outcome, runner, clock };
}

/** True throughput of the outcome's winner as a share of the oracle's best under the cap. */
function reached(shape: Shape, outcome: SearchOutcome): number {
  const best = oracleBest(shape.spec, shape.space, shape.capBytes);
  if (best === null || outcome.best === null) return 0;
  return throughput(shape.spec, outcome.best.knobs) / best.samplesPerSecond;
}

const micro = (knobs: Knobs): number => Number(knobs.batch_size);

describe("searchKnobs on known curves", () => {
  const noises: [string, Partial<SimulatedOptions>][] = [
    ["noiseless", {}],
    ["noisy seed 1", { seed: 1, stepNoise: 0.03, trialNoise: 0.01, peakNoise: 0.003 }],
    ["noisy seed 2", { seed: 2, stepNoise: 0.03, trialNoise: 0.01, peakNoise: 0.003 }],
    ["noisy seed 3", { seed: 3, stepNoise: 0.03, trialNoise: 0.01, peakNoise: 0.003 }],
  ];
  for (const [name, shape] of Object.entries(SHAPES)) {
    for (const [noiseName, sim] of noises) {
      it(`${name} (${shape.about}), ${noiseName}: within 3 % of the best, never over the cap`, async () => {
        const { outcome, runner } = await search(shape.spec, shape.capBytes, shape.space, sim);
        expect(reached(shape, outcome)).toBeGreaterThanOrEqual(0.97);
        expect(runner.calls.filter((c) => c.truePeak > shape.capBytes)).toEqual([]);
        expect(outcome.trials[0]?.purpose).toBe("baseline");
        expect(outcome.trials[0]?.knobs).toEqual(shape.space.baseline);
        expect(outcome.stopReason).toBe("converged");
      });
    }
  }

  for (const name of ["plateau", "knee", "intercept", "effective"] as const) {
    it(`${name}: fewer trials than doubling + bisection, and at least as fast a winner`, async () => {
      const shape = SHAPES[name];
      const ours = await search(shape.spec, shape.capBytes, shape.space);
      const classic = await search(shape.spec, shape.capBytes, shape.space, {}, {}, doublingBisection);
      expect(ours.outcome.trials.length).toBeLessThan(classic.outcome.trials.length);
      expect(reached(shape, ours.outcome)).toBeGreaterThanOrEqual(reached(shape, classic.outcome) - 0.03);
    });
  }

  it("knee: the fastest wins, not the largest (the classic finder picks the largest and loses 80 %)", async () => {
    const shape = SHAPES.knee;
    const ours = await search(shape.spec, shape.capBytes, shape.space);
    const classic = await search(shape.spec, shape.capBytes, shape.space, {}, {}, doublingBisection);
    const winner = micro(ours.outcome.best?.knobs ?? {});
    expect(winner).toBeGreaterThanOrEqual(40);
    expect(winner).toBeLessThanOrEqual(56);
    expect(Math.max(...ours.outcome.trials.map((t) => micro(t.knobs)))).toBeGreaterThan(winner);
    expect(reached(shape, classic.outcome)).toBeLessThan(0.3);
    expect(ours.outcome.notes.some((n) => n.includes("not the largest that ran"))).toBe(true);
  });

  it("effective batch: every trial keeps micro × accumulation = 240 with a divisor micro-batch", async () => {
    const shape = SHAPES.effective;
    const { outcome } = await search(shape.spec, shape.capBytes, shape.space, { seed: 4, stepNoise: 0.03 });
    for (const t of outcome.trials) {
      expect(240 % micro(t.knobs)).toBe(0);
      expect(micro(t.knobs) * Number(t.knobs.accumulation)).toBe(240);
    }
    expect(outcome.best?.knobs).toEqual({ batch_size: 120, accumulation: 2 });
  });

  it("precision: a value that halves memory per sample gets its own line and a second micro-batch phase", async () => {
    const shape = SHAPES.precision;
    const { outcome } = await search(shape.spec, shape.capBytes, shape.space);
    const fp32Max = Math.max(...outcome.trials.filter((t) => t.knobs.precision === "fp32").map((t) => micro(t.knobs)));
    const bf16Max = Math.max(...outcome.trials.filter((t) => t.knobs.precision === "bf16-mixed").map((t) => micro(t.knobs)));
    expect(bf16Max).toBeGreaterThan(1.7 * fp32Max);
    expect(outcome.best?.knobs).toMatchObject({ precision: "bf16-mixed", num_workers: 2 });
    expect(outcome.notes.some((n) => n.includes("memory line of its own"))).toBe(true);
    // the reported line is the winner's: bf16 keeps half the bytes per sample
    expect(outcome.memoryLine?.bytesPerSample).toBeCloseTo(0.5 * shape.spec.perSampleBytes, -2);
    const classic = await search(shape.spec, shape.capBytes, shape.space, {}, {}, doublingBisection);
    expect(reached(shape, classic.outcome)).toBeLessThan(0.7);
  });

  it("the memory line is exact on noiseless memory and its margin is the floor", async () => {
    const shape = SHAPES.plateau;
    const { outcome } = await search(shape.spec, shape.capBytes, shape.space);
    expect(outcome.memoryLine?.interceptBytes).toBeCloseTo(shape.spec.baseBytes, -1);
    expect(outcome.memoryLine?.bytesPerSample).toBeCloseTo(shape.spec.perSampleBytes, 3);
    expect(outcome.memoryLine?.marginBytes).toBeCloseTo(0.02 * shape.capBytes, 0);
    expect(outcome.memoryLine?.predictedMaxMicroBatch).toBe(Math.floor((0.98 * shape.capBytes - shape.spec.baseBytes) / shape.spec.perSampleBytes));
    expect(outcome.notes.some((n) => n.startsWith("memory line fitted from"))).toBe(true);
  });

  it("a plan's prior lets the first probe go further than ×4", async () => {
    const shape = SHAPES.plateau;
    const prior = { fixedBytes: 15 * MiB, bytesPerSample: 0.28 * MiB };
    const { outcome } = await search(shape.spec, shape.capBytes, shape.space, {}, { prior });
    expect(micro(outcome.trials[1]?.knobs ?? {})).toBeGreaterThan(32);
    expect(outcome.trials[1]?.purpose).toContain("the plan's");
    expect(reached(shape, outcome)).toBeGreaterThanOrEqual(0.97);
  });
});

describe("when things do not fit", () => {
  it("a tiny cap where only micro-batch 1 fits", async () => {
    const spec = { ...DEFAULT_ORACLE, perSampleBytes: MiB };
    const cap = 17.5 * MiB;
    const space: TuneSpace = { baseline: { batch_size: 8 }, microBatch: { knob: "batch_size" }, others: [] };
    const { outcome } = await search(spec, cap, space);
    expect(outcome.best?.knobs).toEqual({ batch_size: 1 });
    expect(outcome.trials[outcome.bestIndex ?? -1]?.knobs).toEqual({ batch_size: 1 });
    expect(outcome.notes[0]).toContain("did not fit under the cap");
    expect(outcome.trials.length).toBeLessThanOrEqual(4);
  });

  it("a cap where not even micro-batch 1 fits: no winner, and a note that says so", async () => {
    const space: TuneSpace = { baseline: { batch_size: 8 }, microBatch: { knob: "batch_size" }, others: [{ knob: "num_workers", values: [0, 2] }] };
    const { outcome } = await search(DEFAULT_ORACLE, 15 * MiB, space);
    expect(outcome.bestIndex).toBeNull();
    expect(outcome.best).toBeNull();
    expect(outcome.trials.map((t) => micro(t.knobs))).toEqual([8, 2, 1]);
    expect(outcome.notes.some((n) => n.includes("nothing fits under the cap") && n.includes("even micro-batch 1"))).toBe(true);
  });

  it("a baseline that crashes is not tuned", async () => {
    const { outcome } = await search(DEFAULT_ORACLE, 64 * MiB, SHAPES.plateau.space, { force: { 0: "crashed" } });
    expect(outcome.trials).toHaveLength(1);
    expect(outcome.bestIndex).toBeNull();
    expect(outcome.notes.some((n) => n.includes("ended crashed"))).toBe(true);
  });

  it("an out-of-memory trial mid-search is a result: nothing at or above it runs again", async () => {
    const shape = SHAPES.plateau;
    const { outcome } = await search(shape.spec, shape.capBytes, shape.space, { force: { 2: "gpu_oom" } });
    const failed = outcome.trials[2];
    expect(failed?.result.end).toBe("gpu_oom");
    const m = micro(failed?.knobs ?? {});
    expect(outcome.trials.slice(3).every((t) => micro(t.knobs) < m)).toBe(true);
    expect(outcome.best).not.toBeNull();
    expect(micro(outcome.best?.knobs ?? {})).toBeLessThan(m);
    expect(outcome.stopReason).toBe("converged");
    expect(outcome.notes.some((n) => n.includes(`clears micro-batch ${m}`))).toBe(true);
  });

  it("a trial the SDK had to split (oomRecoveries > 0) counts as not fitting", async () => {
    const shape = SHAPES.plateau;
    const clock = new FakeClock();
    const sim = new SimulatedRunner(shape.spec, { capBytes: shape.capBytes, clock });
    const runner: TrialRunner = {
      async run(knobs, purpose) {
        const result = await sim.run(knobs, purpose);
        return micro(knobs) >= 200 ? { ...result, oomRecoveries: 1 } : result;
      },
    };
    const outcome = await searchKnobs(shape.space, runner, { capBytes: shape.capBytes, maxTrials: 40, maxTimeS: 1e6, now: clock.now });
    expect(micro(outcome.best?.knobs ?? {})).toBeLessThan(200);
    const split = outcome.trials.filter((t) => micro(t.knobs) >= 200);
    expect(split.length).toBeGreaterThanOrEqual(1);
    const firstSplit = split[0]?.index ?? Infinity;
    expect(outcome.trials.filter((t) => t.index > firstSplit && micro(t.knobs) >= micro(split[0]?.knobs ?? {}))).toEqual([]);
  });

  it("a crash at a large micro-batch bounds the micro-batch like an out-of-memory end", async () => {
    const shape = SHAPES.plateau;
    const { outcome } = await search(shape.spec, shape.capBytes, shape.space, { force: { 2: "crashed" } });
    const m = micro(outcome.trials[2]?.knobs ?? {});
    expect(outcome.trials.slice(3).every((t) => micro(t.knobs) < m)).toBe(true);
    expect(outcome.best).not.toBeNull();
  });

  it("a value of another knob that fails is dropped and the search goes on", async () => {
    const shape = SHAPES.precision;
    const clock = new FakeClock();
    const sim = new SimulatedRunner(shape.spec, { capBytes: shape.capBytes, clock });
    const runner: TrialRunner = {
      async run(knobs, purpose) {
        const result = await sim.run(knobs, purpose);
        return knobs.num_workers === 2 ? { ...result, end: "crashed", samplesPerSecond: null } : result;
      },
    };
    const outcome = await searchKnobs(shape.space, runner, { capBytes: shape.capBytes, maxTrials: 40, maxTimeS: 1e6, now: clock.now });
    expect(outcome.best?.knobs.num_workers).toBe(1);
    expect(outcome.notes.some((n) => n.includes("num_workers=2 ended crashed"))).toBe(true);
  });
});

describe("budgets", () => {
  it("maxTrials: stops there, with the best so far", async () => {
    const shape = SHAPES.plateau;
    const { outcome } = await search(shape.spec, shape.capBytes, shape.space, {}, { maxTrials: 3 });
    expect(outcome.trials).toHaveLength(3);
    expect(outcome.stopReason).toBe("max_trials");
    expect(outcome.bestIndex).toBe(2);
    const one = await search(shape.spec, shape.capBytes, shape.space, {}, { maxTrials: 1 });
    expect(one.outcome.trials).toHaveLength(1);
    expect(one.outcome.bestIndex).toBe(0);
  });

  it("maxTimeS: a trial that cannot finish in time is not started", async () => {
    const shape = SHAPES.plateau;
    for (const maxTimeS of [5, 8, 12, 20]) {
      const { outcome, clock } = await search(shape.spec, shape.capBytes, shape.space, {}, { maxTimeS });
      expect(clock.t).toBeLessThanOrEqual(maxTimeS + (outcome.trials.length === 1 ? Infinity : 0));
      expect(outcome.stopReason).toBe("max_time");
      expect(outcome.notes.some((n) => n.includes("time budget"))).toBe(true);
    }
  });

  it("an interrupted trial ends the search", async () => {
    const shape = SHAPES.precision;
    const { outcome } = await search(shape.spec, shape.capBytes, shape.space, { force: { 3: "interrupted" } });
    expect(outcome.trials).toHaveLength(4);
    expect(outcome.stopReason).toBe("interrupted");
  });

  it("onTrial hears of each trial before and after, with a plausible planned total", async () => {
    const shape = SHAPES.precision;
    const events: { index: number; after: boolean; planned: number; best: number | null }[] = [];
    const { outcome } = await search(
      shape.spec,
      shape.capBytes,
      shape.space,
      {},
      {
        maxTrials: 30,
        onTrial: (e) => events.push({ index: e.index, after: e.result !== undefined, planned: e.plannedTotal, best: e.bestIndex }),
      },
    );
    expect(events).toHaveLength(2 * outcome.trials.length);
    events.forEach((e, i) => {
      expect(e.index).toBe(Math.floor(i / 2));
      expect(e.after).toBe(i % 2 === 1);
      expect(e.planned).toBeGreaterThan(e.index);
      expect(e.planned).toBeLessThanOrEqual(30);
    });
    expect(events.at(-1)?.best).toBe(outcome.bestIndex);
  });
});

describe("the space", () => {
  it("without a micro-batch knob only the other knobs are tuned", async () => {
    const space: TuneSpace = {
      baseline: { batch_size: 64 },
      others: [
        { knob: "num_workers", values: [0, 1, 2, 4] },
        { knob: "pin_memory", values: [false, true] },
      ],
    };
    const { outcome } = await search(DEFAULT_ORACLE, 64 * MiB, space);
    expect(outcome.trials.every((t) => t.knobs.batch_size === 64)).toBe(true);
    expect(outcome.best?.knobs).toEqual({ batch_size: 64, num_workers: 2, pin_memory: true });
    expect(outcome.memoryLine).toBeNull();
  });

  it("a knob whose first alternative is clearly slower stops early", async () => {
    const space: TuneSpace = { baseline: { batch_size: 32, num_workers: 2 }, others: [{ knob: "num_workers", values: [2, 4, 8, 16] }] };
    const { outcome } = await search(DEFAULT_ORACLE, 64 * MiB, space);
    // the baseline, its repeat (every comparison leans on it), then 4: clearly slower, so 8 and 16 are not tried
    expect(outcome.trials.map((t) => t.knobs.num_workers)).toEqual([2, 2, 4]);
    expect(outcome.notes.some((n) => n.includes("clearly slower"))).toBe(true);
  });

  it("bisects toward a micro-batch that crashed (a batch larger than the dataset) instead of walking down one by one", async () => {
    const spec: OracleSpec = { ...DEFAULT_ORACLE, perSampleBytes: 16 * 1024, knee: Infinity };
    const clock = new FakeClock();
    const sim = new SimulatedRunner(spec, { capBytes: 4096 * MiB, clock });
    const crashAbove = 256;
    const runner: TrialRunner = {
      async run(knobs, purpose) {
        if (typeof knobs.batch_size === "number" && knobs.batch_size > crashAbove) {
          return { end: "crashed", samplesPerSecond: null, stepSeconds: [], peakBytes: 1, frameworkPeakBytes: null, durationS: 1, oomRecoveries: 0 };
        }
        return sim.run(knobs, purpose);
      },
    };
    const space: TuneSpace = { baseline: { batch_size: 64 }, microBatch: { knob: "batch_size" }, others: [] };
    const outcome = await searchKnobs(space, runner, { capBytes: 4096 * MiB, maxTrials: 20, maxTimeS: 10_000, now: () => clock.now() });
    const crashed = outcome.trials.filter((t) => t.result.end === "crashed").map((t) => t.knobs.batch_size as number);
    // 1024 failed, then halving the distance to 256: at most log2(768) trials, never a walk one by one
    expect(crashed.length).toBeLessThanOrEqual(Math.ceil(Math.log2(1024 - 256)));
    for (let i = 1; i < crashed.length; i++) expect((crashed[i - 1] as number) - (crashed[i] as number)).toBeGreaterThan(1);
    const winner = outcome.trials[outcome.bestIndex ?? 0]?.knobs.batch_size as number;
    expect(winner).toBeGreaterThanOrEqual(200);
    expect(winner).toBeLessThanOrEqual(crashAbove);
  });

  it("rejects bad input with the field named", async () => {
    const runner = new SimulatedRunner(DEFAULT_ORACLE, { capBytes: 64 * MiB, clock: new FakeClock() });
    const ok: SearchOptions = { capBytes: 64 * MiB, maxTrials: 10, maxTimeS: 100, now: () => 0 };
    const space = SHAPES.plateau.space;
    await expect(searchKnobs(space, runner, { ...ok, maxTrials: 0 })).rejects.toThrow(InputError);
    await expect(searchKnobs(space, runner, { ...ok, capBytes: -1 })).rejects.toThrow(/capBytes/);
    await expect(searchKnobs({ ...space, effectiveBatch: 64 }, runner, ok)).rejects.toThrow(/accumulation/);
    await expect(searchKnobs({ ...space, baseline: { batch_size: "many" } }, runner, ok)).rejects.toThrow(/positive integer/);
    await expect(searchKnobs({ ...space, others: [{ knob: "batch_size", values: [1] }] }, runner, ok)).rejects.toThrow(/others/);
    expect(runner.calls).toHaveLength(0);
  });

  it("peaks are read from the framework when the capped memory was not measured", async () => {
    const shape = SHAPES.plateau;
    const clock = new FakeClock();
    const sim = new SimulatedRunner(shape.spec, { capBytes: shape.capBytes, clock });
    const runner: TrialRunner = {
      async run(knobs, purpose) {
        const result: TrialResult = await sim.run(knobs, purpose);
        return { ...result, frameworkPeakBytes: result.peakBytes, peakBytes: null };
      },
    };
    const outcome = await searchKnobs(shape.space, runner, { capBytes: shape.capBytes, maxTrials: 40, maxTimeS: 1e6, now: clock.now });
    expect(outcome.memoryLine?.bytesPerSample).toBeCloseTo(shape.spec.perSampleBytes, 3);
    expect(sim.calls.every((c) => c.truePeak <= shape.capBytes)).toBe(true);
    expect(peakBytes(shape.spec, outcome.best?.knobs ?? {})).toBeLessThanOrEqual(0.98 * shape.capBytes);
  });
});
