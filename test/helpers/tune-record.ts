// What an end-to-end tune test may assert of its tune.json without resting on how fast this machine
// was: the record holds together, and its verdict is the one its own recorded measurements give.
// Which configuration is fastest is decided on simulated and recorded trials (test/tune/search*.test.ts,
// confirm*.test.ts, replay.test.ts); what a tune achieves is a benchmark (bench/).
import { expect } from "vitest";
import { intervalVerdict } from "../../src/tune/confirm.ts";
import type { TuneRecord, TuneTrialRecord } from "../../src/record/types.ts";

const key = (knobs: Record<string, unknown>): string => JSON.stringify(Object.entries(knobs).sort(([a], [b]) => a.localeCompare(b)));

/** The A/B pairs of the confirmation whose two trials both measured a rate, as the confirmation keeps them. */
export function confirmPairs(trials: readonly TuneTrialRecord[]): { a: number[]; b: number[] } {
  const confirms = trials.filter((trial) => trial.purpose.startsWith("confirm"));
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i + 1 < confirms.length; i += 2) {
    const [before, after] = [confirms[i] as TuneTrialRecord, confirms[i + 1] as TuneTrialRecord];
    if (before.end === "ok" && after.end === "ok" && before.samples_per_s !== null && after.samples_per_s !== null) {
      a.push(before.samples_per_s);
      b.push(after.samples_per_s);
    }
  }
  return { a, b };
}

/**
 * Checks a tune record's decision against its own measurements: a winner only with a confirmed
 * interval above 1.0, the interval's verdict, the speedup as the ratio of the geometric means of the
 * recorded interleaved pairs (A = your configuration, B = the winner, taking turns), and a winner that
 * is a configuration that ran as given.
 *
 * @example
 * ```ts
 * expectRecordDecides(JSON.parse(readFileSync(join(store, "tunes", id, "tune.json"), "utf8")));
 * ```
 */
export function expectRecordDecides(record: TuneRecord): void {
  const c = record.confirmation ?? null;
  if (record.winner !== null) {
    expect(c?.verdict, "a winner is a confirmed one").toBe("confirmed");
    const ran = record.trials.filter((trial) => trial.end === "ok" && trial.oom_recoveries === 0).map((trial) => key(trial.knobs));
    expect(ran, "the winner ran as given").toContain(key(record.winner.knobs));
  } else {
    expect(record.no_winner?.reason ?? "", "no winner says why").not.toBe("");
  }
  const confirms = record.trials.filter((trial) => trial.purpose.startsWith("confirm"));
  confirms.forEach((trial, i) => expect(trial.purpose).toMatch(i % 2 === 0 ? /\(A\)/ : /\(B\)/));
  if (c === null || c.low === null || c.high === null || c.speedup === null) return;
  expect(intervalVerdict(c.low, c.high)).toBe(c.verdict);
  expect(c.low).toBeLessThanOrEqual(c.speedup);
  expect(c.high).toBeGreaterThanOrEqual(c.speedup);
  const { a, b } = confirmPairs(record.trials);
  expect(c.baseline_rates).toEqual(a);
  expect(c.winner_rates).toEqual(b);
  const logMean = (values: number[]): number => values.reduce((s, v) => s + Math.log(v), 0) / values.length;
  expect(Math.log(c.speedup)).toBeCloseTo(logMean(b) - logMean(a), 9);
  const baseline = record.trials.find((trial) => trial.index === 0);
  for (const [i, trial] of confirms.entries()) if (i % 2 === 0 && baseline !== undefined) expect(key(trial.knobs)).toBe(key(baseline.knobs));
}
