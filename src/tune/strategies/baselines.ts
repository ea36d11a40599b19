/**
 * Two reference searches to measure {@link searchKnobs} against: the classic batch-size finder
 * (double until it does not fit, then bisect, keep the largest that fits) and an exhaustive grid
 * (every listed micro-batch under every combination of the other knobs, keep the fastest).
 *
 * @example
 * ```ts
 * const classic = await doublingBisection(space, runner, options);
 * const grid = await exhaustiveGrid(space, runner, { ...options, microBatches: [1, 2, 4, 8, 16, 32, 64, 128] });
 * ```
 * @module
 */
import { formatBytes } from "../../bytes.ts";
import type { Knobs, SearchOptions, SearchOutcome, TrialRunner, TuneSpace } from "../types.ts";
import { didNotFit, ranAsGiven, type ConfigEstimate } from "./ledger.ts";
import { checkOptions, newSearcher, rate, type Searcher } from "./searcher.ts";

/**
 * The classic batch-size finder: from the baseline's micro-batch, double until a trial does not run
 * as given (out of memory, over the cap, an SDK split, any failure), then bisect between the last that
 * ran and the first that did not; the winner is the largest micro-batch that ran. When the baseline
 * does not run, halve until one does. Other knobs are left as they are. No margin, no timing.
 *
 * @example
 * ```ts
 * const { bestIndex, trials } = await doublingBisection(space, runner, { capBytes, maxTrials: 30, maxTimeS: 3600, now });
 * ```
 */
export async function doublingBisection(space: TuneSpace, runner: TrialRunner, options: SearchOptions): Promise<SearchOutcome> {
  checkOptions(options);
  const s = newSearcher(space, runner, options);
  const { axis, ledger } = s;
  const context = axis.contextOf(space.baseline);
  const base = await ledger.run(space.baseline, "baseline", null);
  const m0 = axis.microOf(space.baseline);
  if (base === null || m0 === null) return finish(s, base !== null && ranAsGiven(base.result) ? (ledger.estimate(space.baseline) ?? null) : null);
  const fits = async (m: number, purpose: string): Promise<boolean | null> => {
    const trial = await ledger.run(axis.knobsAt(context, m), purpose, null);
    return trial === null ? null : ranAsGiven(trial.result);
  };
  let lo: number | null = ranAsGiven(base.result) ? m0 : null;
  let hi: number | null = lo === null ? m0 : null;
  while (lo !== null && hi === null) {
    const m = axis.atLeast(lo * 2);
    if (m === null) break;
    const ok = await fits(m, `double: micro-batch ${m}`);
    if (ok === null) break;
    if (ok) lo = m;
    else hi = m;
  }
  while (lo === null && hi !== null) {
    const m = axis.atMost(Math.floor(hi / 2));
    if (m === null) break;
    const ok = await fits(m, `halve: micro-batch ${m}`);
    if (ok === null) break;
    if (ok) lo = m;
    else hi = m;
  }
  while (lo !== null && hi !== null && ledger.stopReason === null) {
    const mid = axis.between(lo, hi, (lo + hi) / 2);
    if (mid === null) break;
    const ok = await fits(mid, `bisect: micro-batch ${mid} between ${lo} and ${hi}`);
    if (ok === null) break;
    if (ok) lo = mid;
    else hi = mid;
  }
  if (lo === null) {
    s.notes.push(`no micro-batch ran under the cap ${formatBytes(options.capBytes)}`);
    return finish(s, null);
  }
  s.notes.push(`largest micro-batch that ran: ${lo}${hi === null ? "" : `; ${hi} did not`}`);
  return finish(s, ledger.estimate(axis.knobsAt(context, lo)) ?? null);
}

/**
 * Runs every micro-batch of `microBatches` (those the axis allows) under every combination of the
 * other knobs' values, skipping micro-batches at or above one that did not fit in the same
 * combination; the winner is the highest measured throughput.
 *
 * @example
 * ```ts
 * const grid = await exhaustiveGrid(space, runner, { ...options, microBatches: [8, 16, 32, 64, 128, 256] });
 * grid.trials.length; // up to microBatches × Π values
 * ```
 */
export async function exhaustiveGrid(space: TuneSpace, runner: TrialRunner, options: SearchOptions & { microBatches: number[] }): Promise<SearchOutcome> {
  checkOptions(options);
  const s = newSearcher(space, runner, options);
  const { axis, ledger } = s;
  await ledger.run(space.baseline, "baseline", null);
  let contexts: Knobs[] = [axis.contextOf(space.baseline)];
  for (const { knob, values } of space.others) contexts = contexts.flatMap((c) => values.map((v) => ({ ...c, [knob]: v })));
  const micro = axis.knob === undefined ? [null] : [...new Set(options.microBatches)].filter((m) => axis.allows(m)).sort((a, b) => a - b);
  ledger.expect(contexts.length * micro.length);
  outer: for (const context of contexts) {
    let failedAt = Infinity;
    for (const m of micro) {
      if (m !== null && m >= failedAt) continue;
      const knobs = m === null ? context : axis.knobsAt(context, m);
      const earlier = ledger.trialsOf(knobs);
      const trial =
        earlier[0] ??
        (await ledger.run(
          knobs,
          `grid: ${[
            m === null ? "" : `micro-batch ${m}`,
            ...Object.keys(context)
              .sort()
              .map((k) => `${k}=${String(context[k])}`),
          ]
            .filter((x) => x !== "")
            .join(" ")}`,
          null,
        ));
      if (trial === null) break outer;
      if (m !== null && didNotFit(trial.result)) failedAt = m;
    }
  }
  let best: ConfigEstimate | null = null;
  for (const e of ledger.estimates()) if (best === null || e.mean > best.mean) best = e;
  return finish(s, best);
}

function finish(s: Searcher, winner: ConfigEstimate | null): SearchOutcome {
  if (winner !== null) s.notes.push(`winner: ${rate(winner.mean)}`);
  return {
    trials: s.ledger.trials,
    bestIndex: winner?.indices.at(-1) ?? null,
    stopReason: s.ledger.stopReason ?? "converged",
    memoryLine: null,
    notes: s.notes,
    best: winner === null ? null : { knobs: winner.knobs, samplesPerSecond: winner.mean, measurements: winner.count },
    noise: s.ledger.noise(),
  };
}
