import { describe, expect, it } from "vitest";
import { searchKnobs } from "../../src/tune/search.ts";
import { knobsKey } from "../../src/tune/strategies/axis.ts";
import { newSearcher } from "../../src/tune/strategies/searcher.ts";
import { APART_MAX, measureApart } from "../../src/tune/strategies/settle.ts";
import type { Knobs, SearchOptions, TrialResult, TrialRunner, TuneSpace } from "../../src/tune/types.ts";

/** A trial that ran as given at `rate` samples/s, over steady steps whose own error is ±`within` (batch means). */
const ok = (rate: number, within = 0.004): TrialResult => ({
  end: "ok",
  samplesPerSecond: rate,
  stepSeconds: [1, 1 + within * 4, 1 - within * 4, 1, 1 + within * 4, 1 - within * 4],
  peakBytes: null,
  frameworkPeakBytes: null,
  durationS: 10,
  oomRecoveries: 0,
  stoppedBy: "stable",
});

/** Plays back recorded rates per configuration, in order; records every trial's knobs and purpose. */
class Playback implements TrialRunner {
  readonly calls: { knobs: Knobs; purpose: string }[] = [];
  readonly #rates: Map<string, number[]>;
  constructor(rates: [Knobs, number[]][]) {
    this.#rates = new Map(rates.map(([k, r]) => [knobsKey(k), [...r]]));
  }
  run(knobs: Knobs, purpose: string): Promise<TrialResult> {
    this.calls.push({ knobs, purpose });
    return Promise.resolve(ok(this.#rates.get(knobsKey(knobs))?.shift() ?? 100));
  }
}

const options = (maxTrials = 20): SearchOptions => ({ capBytes: 8e9, maxTrials, maxTimeS: 1e9, now: () => 0 });
const A = { num_workers: 0 };
const B = { num_workers: 2 };
const space: TuneSpace = { baseline: A, others: [{ knob: "num_workers", values: [0, 2] }] };

async function twoMeasured(rates: [Knobs, number[]][], maxTrials = 20): Promise<{ runner: Playback; s: ReturnType<typeof newSearcher> }> {
  const runner = new Playback(rates);
  const s = newSearcher(space, runner, options(maxTrials));
  await s.ledger.run(A, "baseline", null);
  await s.ledger.run(B, "knob", null);
  return { runner, s };
}

describe("a decision between two values whose intervals overlap is measured again, interleaved", () => {
  it("measures both again, taking turns, before either is dropped", async () => {
    // recorded: num_workers 0 read 100 and 100.4, 2 read 100.6 and 100.2 (within ±0.5 % steps: one trial each cannot tell)
    const { runner, s } = await twoMeasured([
      [A, [100, 100.4]],
      [B, [100.6, 100.2]],
    ]);
    const apart = await measureApart(s, s.ledger.estimate(B)!, s.ledger.estimate(A)!);
    const again = runner.calls.slice(2);
    // interleaved: on equal counts the first named, then the other
    expect(again.map((c) => c.knobs.num_workers)).toEqual([2, 0]);
    for (const c of again)
      expect(c.purpose).toMatch(
        /^re-measure, interleaved: num_workers=\d, against num_workers=\d — [\d.]+ % apart, their intervals overlap \(±[\d.]+ %\): neither is dropped yet$/,
      );
    expect(apart.runs).toBe(2);
    expect([apart.a.count, apart.b.count]).toEqual([APART_MAX, APART_MAX]);
    // the noise is now the spread of the two repeats, and the verdict stands on two trials each
    expect(s.ledger.noiseEstimate().source).toBe("repeats");
  });

  it("runs nothing when the intervals are apart", async () => {
    const { runner, s } = await twoMeasured([
      [A, [100]],
      [B, [150]],
    ]);
    const apart = await measureApart(s, s.ledger.estimate(B)!, s.ledger.estimate(A)!);
    expect(runner.calls).toHaveLength(2);
    expect(apart).toMatchObject({ verdict: "better", overlap: false, runs: 0 });
  });

  it("measures the one measured fewer times first, and stops where the trial budget does", async () => {
    const runner = new Playback([
      [A, [100, 100.5, 99.5]],
      [B, [101, 100]],
    ]);
    const free = newSearcher(space, new Playback([]), options());
    for (const k of [A, A, B]) await free.ledger.run(k, "recorded", null);
    expect((await measureApart(free, free.ledger.estimate(B)!, free.ledger.estimate(A)!)).runs).toBe(1);
    const s = newSearcher(space, runner, options(3));
    await s.ledger.run(A, "baseline", null);
    await s.ledger.run(A, "again", null);
    await s.ledger.run(B, "knob", null);
    const apart = await measureApart(s, s.ledger.estimate(B)!, s.ledger.estimate(A)!);
    expect(runner.calls.map((c) => c.knobs.num_workers)).toEqual([0, 0, 2]);
    expect(s.ledger.stopReason).toBe("max_trials");
    expect(apart.overlap).toBe(true);
  });
});

describe("the search measures two overlapping values again before it drops one", () => {
  it("the walk: a knob value within its intervals of the value held is re-measured, interleaved, before it is let go", async () => {
    const runner = new Playback([
      [A, [100, 101, 100.5]],
      [B, [101.5, 100.5, 101]],
    ]);
    const outcome = await searchKnobs(space, runner, options());
    const purposes = runner.calls.map((c) => c.purpose);
    const first = purposes.findIndex((p) => p.startsWith("knob num_workers=2"));
    expect(first).toBeGreaterThan(0);
    expect(purposes[first + 1]).toMatch(/^re-measure, interleaved: num_workers=2, against num_workers=0/);
    // no value is dropped on one trial: each ran twice at least before the verdict
    const counts = [A, B].map((k) => runner.calls.filter((c) => knobsKey(c.knobs) === knobsKey(k)).length);
    expect(Math.min(...counts)).toBeGreaterThanOrEqual(2);
    expect(outcome.notes.some((n) => /^num_workers: num_workers=2: .* — within noise, not kept/.test(n))).toBe(true);
  });
});
