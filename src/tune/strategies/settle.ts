/**
 * A decision between two configurations whose 95 % intervals overlap is not taken on the trials
 * so far: both are measured again, interleaved (the one measured fewer times first, then taking
 * turns), so that a machine growing busier weighs on both, until the intervals part, each has run
 * {@link APART_MAX} times, or a budget stops the search. Only then is one of them dropped.
 *
 * @example
 * ```ts
 * const { verdict } = await measureApart(s, candidate, incumbent);
 * if (verdict === "better") s.incumbent = candidate;
 * ```
 * @module
 */
import { ranAsGiven, type ConfigEstimate } from "./ledger.ts";
import { compareThroughput, intervalsOverlap, NOISE_Z } from "./noise.ts";
import { describeKnobs, pct, type Searcher } from "./searcher.ts";

/** How many times each of two configurations whose intervals overlap is measured, at most, before one is dropped. */
export const APART_MAX = 2;

/** Two configurations after {@link measureApart}: their latest estimates, `a`'s verdict against `b`, and whether their intervals still overlap. */
export interface Apart {
  a: ConfigEstimate;
  b: ConfigEstimate;
  verdict: "better" | "worse" | "tie";
  overlap: boolean;
  /** trials run to part them */
  runs: number;
}

/**
 * Measures `a` and `b` again, interleaved, while their intervals overlap (see the module doc).
 * `label` names a configuration in the trials' purposes (default: its knobs). A configuration stopped
 * early as clearly slower (its mean a bound) is not measured again: that stop was its own decision.
 *
 * @example
 * ```ts
 * await measureApart(s, estimate, incumbent, (e) => `num_workers=${e.knobs.num_workers}`);
 * ```
 */
export async function measureApart(
  s: Searcher,
  a: ConfigEstimate,
  b: ConfigEstimate,
  label: (e: ConfigEstimate) => string = (e) => describeKnobs(e.knobs),
): Promise<Apart> {
  let last: string | null = null;
  let runs = 0;
  let ea = a;
  let eb = b;
  for (;;) {
    ea = s.ledger.estimate(a.knobs) ?? ea;
    eb = s.ledger.estimate(b.knobs) ?? eb;
    const noise = s.ledger.noise();
    const overlap = intervalsOverlap(ea, eb, noise);
    const settled = !overlap || (ea.count >= APART_MAX && eb.count >= APART_MAX) || ea.bounded === true || eb.bounded === true;
    if (settled || s.ledger.stopReason !== null) return { a: ea, b: eb, verdict: compareThroughput(ea, eb, noise), overlap, runs };
    const next: ConfigEstimate = ea.count !== eb.count ? (ea.count < eb.count ? ea : eb) : last === ea.key ? eb : ea;
    const other = next === ea ? eb : ea;
    s.ledger.expect(1);
    const trial = await s.ledger.run(next.knobs, purposeOf(label(next), label(other), ea, eb, noise), null);
    if (trial === null) continue;
    runs++;
    last = next.key;
    if (!ranAsGiven(trial.result)) return { a: ea, b: eb, verdict: compareThroughput(ea, eb, noise), overlap, runs };
  }
}

function purposeOf(next: string, other: string, a: ConfigEstimate, b: ConfigEstimate, noise: number): string {
  const apart = Math.abs(a.mean / b.mean - 1);
  const widest = (NOISE_Z * noise) / Math.sqrt(Math.min(a.count, b.count));
  return `re-measure, interleaved: ${next}, against ${other} — ${pct(apart)} apart, their intervals overlap (±${pct(widest)}): neither is dropped yet`;
}
