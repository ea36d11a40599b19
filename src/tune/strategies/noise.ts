/**
 * How sure a throughput measurement is, and when one configuration counts as faster than another.
 * The rule is written out in docs/tune-search.md ("Noise").
 *
 * @example
 * ```ts
 * compareThroughput({ mean: 1040, count: 1 }, { mean: 1000, count: 1 }, 0.01); // "tie": 4 % is within 2·√2·1 %
 * ```
 * @module
 */
import { mean as meanOf, median } from "../../stats.ts";

/** The relative noise a trial's throughput is assumed to have before any configuration was measured twice. */
export const NOISE_FLOOR = 0.005;
/** How many standard errors apart two means must be to count as different. */
export const NOISE_Z = 2;

/** A configuration's throughput: mean samples/s over its trials and how many there were. */
export interface Measured {
  mean: number;
  count: number;
}

/** Consecutive blocks a trial's steps are cut into for its standard error (batch means), at most. */
export const NOISE_BLOCKS = 6;

/**
 * Relative standard error of one trial's throughput from its steady steps, or null with fewer than
 * three steps. With enough steps (two a block, three blocks at least) by batch means: the steps cut
 * into up to {@link NOISE_BLOCKS} consecutive blocks of equal count, the spread of the blocks' mean
 * step time over √blocks. Step times that take turns (asynchronous dispatch: most steps only queue
 * work and one in a few waits for all of it, a log line every k steps) then weigh as the trial's
 * mean feels them, not as independent draws. Fewer steps: cv / √n.
 *
 * @example
 * ```ts
 * withinTrialNoise([0.1, 0.11, 0.09, 0.1]); // ≈ 0.0041
 * withinTrialNoise(Array.from({ length: 60 }, (_, i) => (i % 2 === 1 ? 0.05 : 0.001))); // ≈ 0: every block holds the same turns
 * ```
 */
export function withinTrialNoise(stepSeconds: readonly number[]): number | null {
  const n = stepSeconds.length;
  if (n < 3) return null;
  const blocks = Math.min(NOISE_BLOCKS, Math.floor(n / 2));
  const size = Math.floor(n / blocks);
  const values = blocks >= 3 ? Array.from({ length: blocks }, (_, b) => meanOf(stepSeconds.slice(b * size, (b + 1) * size)) ?? 0) : [...stepSeconds];
  const mean = meanOf(values) ?? 0;
  if (!(mean > 0)) return null;
  const variance = values.reduce((s, x) => s + (x - mean) ** 2, 0) / (values.length - 1);
  return Math.sqrt(variance) / mean / Math.sqrt(values.length);
}

/** Degrees of freedom of repeated trials from which their spread alone is the noise of a trial. */
export const REPEATS_DF = 3;

/**
 * Where the noise of a tune comes from: `repeats`, the spread of configurations measured more than
 * once in this tune (with the steps' own error beside it while they have fewer than
 * {@link REPEATS_DF} degrees of freedom); `assumed`, no configuration measured twice yet, so the
 * steps' own error and {@link NOISE_FLOOR} stand in for it.
 */
export interface NoiseEstimate {
  /** relative noise of one trial's throughput */
  noise: number;
  source: "repeats" | "assumed";
  /** degrees of freedom of the repeats (0: none) */
  df: number;
  /** the repeats' own spread, where the trials' step noise was the larger and stood in for it (fewer than REPEATS_DF degrees of freedom) */
  spread?: number;
}

/**
 * The relative noise of one trial's throughput and where it comes from. Once a configuration has been
 * measured twice, the spread between repeated trials of the same configuration (pooled relative
 * standard deviation, which catches drift between trials that steps cannot show), and, until the
 * repeats have {@link REPEATS_DF} degrees of freedom, the median within-trial error beside it (the
 * larger: one degree of freedom can draw two close trials by chance); from {@link REPEATS_DF} on, the
 * repeats alone. No floor under measured repeats: before any, the noise is assumed, the larger of
 * {@link NOISE_FLOOR} and the median within-trial error.
 *
 * @example
 * ```ts
 * noiseEstimate([0.004], []); // { noise: 0.005, source: "assumed", df: 0 }
 * noiseEstimate([0.2], [[380, 372], [671, 683], [662, 671], [483, 487]]); // { noise: ≈ 0.013, source: "repeats", df: 4 }
 * ```
 */
export function noiseEstimate(withinTrial: readonly number[], repeats: readonly (readonly number[])[]): NoiseEstimate {
  const { spread, df } = repeatSpread(repeats);
  const middle = median(withinTrial) ?? 0;
  if (df === 0) return { noise: Math.max(NOISE_FLOOR, middle), source: "assumed", df };
  if (df >= REPEATS_DF || spread >= middle) return { noise: spread, source: "repeats", df };
  return { noise: middle, source: "repeats", df, spread };
}

/**
 * The relative noise of one trial's throughput ({@link noiseEstimate}'s number).
 *
 * @example
 * ```ts
 * trialNoise([0.004, 0.006], [[1000, 1030]]); // ≈ 0.021, the repeats dominate
 * trialNoise([0.2], [[380, 372], [671, 683], [662, 671], [483, 487]]); // ≈ 0.013: four repeats, not the 20 % stand-in
 * ```
 */
export function trialNoise(withinTrial: readonly number[], repeats: readonly (readonly number[])[]): number {
  return noiseEstimate(withinTrial, repeats).noise;
}

/**
 * How the noise reads in a note: measured from repeats (how many degrees of freedom), or assumed.
 *
 * @example
 * ```ts
 * describeNoise({ noise: 0.005, source: "assumed", df: 0 }); // "±0.5 % a trial, assumed: no configuration was measured twice"
 * ```
 */
export function describeNoise(estimate: NoiseEstimate): string {
  const share = estimate.noise * 100;
  const value = `±${share >= 10 ? share.toFixed(0) : share.toFixed(1)} % a trial`;
  const df = `${estimate.df} degree${estimate.df === 1 ? "" : "s"} of freedom`;
  if (estimate.source === "assumed") return `${value}, assumed: no configuration was measured twice`;
  if (estimate.spread !== undefined)
    return `${value}, measured: the trials' own step noise, larger than the ±${(estimate.spread * 100).toFixed(1)} % spread of repeated configurations in this tune (${df}: too few to stand alone)`;
  return `${value}, measured: the spread of repeated configurations in this tune (${df})`;
}

/** The pooled relative standard deviation of groups of throughputs of one configuration each, and its degrees of freedom. */
function repeatSpread(repeats: readonly (readonly number[])[]): { spread: number; df: number } {
  let squares = 0;
  let df = 0;
  for (const values of repeats) {
    if (values.length < 2) continue;
    const mean = meanOf(values) ?? 0;
    if (!(mean > 0)) continue;
    for (const v of values) squares += (v / mean - 1) ** 2;
    df += values.length - 1;
  }
  return { spread: df > 0 ? Math.sqrt(squares / df) : 0, df };
}

/**
 * The relative difference two means must exceed to count as different: z × noise × √(1/nA + 1/nB).
 *
 * @example
 * ```ts
 * noiseThreshold({ mean: 1, count: 1 }, { mean: 1, count: 1 }, 0.005); // ≈ 0.0141
 * ```
 */
export function noiseThreshold(a: Measured, b: Measured, noise: number): number {
  return NOISE_Z * noise * Math.sqrt(1 / a.count + 1 / b.count);
}

/**
 * Whether the 95 % intervals of two configurations' throughputs overlap: each mean ± z × noise / √n
 * (relative). Overlapping, neither is known apart from the other: before either is dropped, both are
 * measured again, interleaved (strategies/settle.ts).
 *
 * @example
 * ```ts
 * intervalsOverlap({ mean: 1050, count: 1 }, { mean: 1000, count: 1 }, 0.02); // true: ±4 % each
 * intervalsOverlap({ mean: 1200, count: 2 }, { mean: 1000, count: 2 }, 0.02); // false
 * ```
 */
export function intervalsOverlap(a: Measured, b: Measured, noise: number): boolean {
  const [hi, lo] = a.mean >= b.mean ? [a, b] : [b, a];
  return hi.mean * (1 - (NOISE_Z * noise) / Math.sqrt(hi.count)) <= lo.mean * (1 + (NOISE_Z * noise) / Math.sqrt(lo.count));
}

/**
 * Whether `a` is clearly faster than `b`, clearly slower, or within noise of it.
 *
 * @example
 * ```ts
 * compareThroughput({ mean: 1100, count: 1 }, { mean: 1000, count: 2 }, 0.01); // "better"
 * ```
 */
export function compareThroughput(a: Measured, b: Measured, noise: number): "better" | "worse" | "tie" {
  const diff = a.mean / b.mean - 1;
  const threshold = noiseThreshold(a, b, noise);
  if (diff > threshold) return "better";
  if (diff < -threshold) return "worse";
  return "tie";
}

/**
 * The winner among measured configurations: of those not clearly slower than the fastest mean, the
 * one measured most often, then the faster.
 *
 * @example
 * ```ts
 * pickFastest([{ mean: 1000, count: 2 }, { mean: 1005, count: 1 }], 0.01); // the first: a tie, measured twice
 * ```
 */
export function pickFastest<T extends Measured>(candidates: readonly T[], noise: number): T | null {
  let top: T | null = null;
  for (const c of candidates) if (top === null || c.mean > top.mean) top = c;
  if (top === null) return null;
  const fastest = top;
  let chosen = fastest;
  for (const c of candidates) {
    if (compareThroughput(c, fastest, noise) === "worse") continue;
    if (c.count > chosen.count || (c.count === chosen.count && c.mean > chosen.mean)) chosen = c;
  }
  return chosen;
}

/** A measured throughput at a micro-batch, for the gap bound. */
export interface CurvePoint {
  x: number;
  y: number;
}

/**
 * The most throughput a concave curve through `points` (sorted by x) can reach inside the gap
 * (lo, hi) that follows points[i] (i = −1: the gap below the first point; i = last: the gap above
 * the last): the lines through the neighbouring pairs, extended into the gap, bound a concave curve
 * from above. Infinity when there is no neighbouring pair on either side. `at` is where the bound
 * peaks (null when unbounded).
 *
 * @example
 * ```ts
 * const pts = [{ x: 8, y: 600 }, { x: 32, y: 1600 }, { x: 128, y: 1100 }, { x: 256, y: 700 }];
 * gapBound(pts, 1, 32, 128); // { bound: ≈ 2200, at: ≈ 46 }
 * ```
 */
export function gapBound(points: readonly CurvePoint[], i: number, lo: number, hi: number): { bound: number; at: number | null } {
  const line = (j: number): ((x: number) => number) | null => {
    const p = points[j];
    const q = points[j + 1];
    if (j < 0 || p === undefined || q === undefined) return null;
    const slope = (q.y - p.y) / (q.x - p.x);
    return (x) => p.y + slope * (x - p.x);
  };
  const left = line(i - 1);
  const right = line(i + 1);
  if (left === null && right === null) return { bound: Infinity, at: null };
  const bound = (x: number): number => Math.min(left?.(x) ?? Infinity, right?.(x) ?? Infinity);
  // the lower of two lines peaks at an end of the gap or where they cross
  const xs = [lo, hi];
  if (left !== null && right !== null) {
    const dl = left(1) - left(0);
    const dr = right(1) - right(0);
    if (dl !== dr) {
      const cross = (right(0) - left(0)) / (dl - dr);
      if (cross > lo && cross < hi) xs.push(cross);
    }
  }
  let best = -Infinity;
  let at: number | null = null;
  for (const x of xs) {
    const v = bound(x);
    if (v > best) {
      best = v;
      at = x;
    }
  }
  return { bound: best, at };
}
