import { describe, expect, it } from "vitest";
import { doublingBisection, exhaustiveGrid, type TuneSpace } from "../../src/tune/search.ts";
import { DEFAULT_ORACLE, FakeClock, peakBytes, SimulatedRunner, throughput } from "./oracle.ts";

const MiB = 2 ** 20;
const space: TuneSpace = { baseline: { batch_size: 8 }, microBatch: { knob: "batch_size" }, others: [] };
const options = (clock: FakeClock, capBytes: number, maxTrials = 50) => ({ capBytes, maxTrials, maxTimeS: 1e6, now: clock.now });

describe("doublingBisection (the classic finder)", () => {
  it("doubles until over the cap, bisects to the exact largest that fits, and picks it", async () => {
    const clock = new FakeClock();
    const cap = 64 * MiB;
    const runner = new SimulatedRunner(DEFAULT_ORACLE, { capBytes: cap, clock });
    const out = await doublingBisection(space, runner, options(clock, cap));
    const largest = Math.floor((cap - DEFAULT_ORACLE.baseBytes) / DEFAULT_ORACLE.perSampleBytes);
    expect(out.best?.knobs).toEqual({ batch_size: largest });
    expect(out.trials.slice(0, 6).map((t) => t.knobs.batch_size)).toEqual([8, 16, 32, 64, 128, 256]);
    expect(out.trials.at(-1)?.purpose).toMatch(/^bisect/);
    expect(out.memoryLine).toBeNull();
    expect(runner.calls.some((c) => c.truePeak > cap)).toBe(true);
  });

  it("halves a baseline that does not fit", async () => {
    const clock = new FakeClock();
    const cap = 20 * MiB;
    const runner = new SimulatedRunner(DEFAULT_ORACLE, { capBytes: cap, clock });
    const out = await doublingBisection({ ...space, baseline: { batch_size: 64 } }, runner, options(clock, cap));
    expect(out.trials.slice(0, 3).map((t) => t.knobs.batch_size)).toEqual([64, 32, 16]);
    expect(out.best?.knobs).toEqual({ batch_size: 16 });
  });

  it("keeps to divisors of a fixed effective batch, and to the trial budget", async () => {
    const clock = new FakeClock();
    const cap = 64 * MiB;
    const runner = new SimulatedRunner(DEFAULT_ORACLE, { capBytes: cap, clock });
    const eff: TuneSpace = {
      baseline: { batch_size: 8, accumulation: 30 },
      microBatch: { knob: "batch_size" },
      accumulation: { knob: "accumulation" },
      effectiveBatch: 240,
      others: [],
    };
    const out = await doublingBisection(eff, runner, options(clock, cap));
    for (const t of out.trials) expect(Number(t.knobs.batch_size) * Number(t.knobs.accumulation)).toBe(240);
    expect(out.best?.knobs).toEqual({ batch_size: 120, accumulation: 2 });
    const short = await doublingBisection(space, new SimulatedRunner(DEFAULT_ORACLE, { capBytes: cap, clock }), options(clock, cap, 4));
    expect(short.trials).toHaveLength(4);
    expect(short.stopReason).toBe("max_trials");
  });
});

describe("exhaustiveGrid", () => {
  it("runs every listed micro-batch under every combination, skipping sizes above a failure, and picks the fastest", async () => {
    const clock = new FakeClock();
    const cap = 64 * MiB;
    const runner = new SimulatedRunner(DEFAULT_ORACLE, { capBytes: cap, clock });
    const grid: TuneSpace = { ...space, others: [{ knob: "num_workers", values: [0, 2] }] };
    const out = await exhaustiveGrid(grid, runner, { ...options(clock, cap), microBatches: [1, 4, 16, 64, 256, 512, 3] });
    // baseline, then per num_workers: 1, 3, 4, 16, 64, 256 (over the cap) — 512 skipped
    expect(out.trials).toHaveLength(1 + 2 * 6);
    expect(out.trials.filter((t) => t.knobs.batch_size === 512)).toEqual([]);
    const fits = out.trials.filter((t) => peakBytes(DEFAULT_ORACLE, t.knobs) <= cap);
    const fastest = Math.max(...fits.map((t) => throughput(DEFAULT_ORACLE, t.knobs)));
    expect(throughput(DEFAULT_ORACLE, out.best?.knobs ?? {})).toBeCloseTo(fastest, 6);
    expect(out.best?.knobs).toEqual({ batch_size: 64, num_workers: 2 });
    // the trial table's "why": what the grid point holds, as knob=value
    expect(out.trials[1]?.purpose).toBe("grid: micro-batch 1 num_workers=0");
  });
});
