/**
 * The memory line of a training job: peak = a + b × micro-batch, fitted by least squares to the
 * peaks of trials that ran, with a safety margin taken from how far the measurements stray from
 * the line. Pure arithmetic, no I/O. The formula is written out in docs/tune-search.md.
 *
 * @example
 * ```ts
 * const fit = fitMemoryLine([{ microBatch: 8, peakBytes: 3e9 }, { microBatch: 32, peakBytes: 6e9 }, { microBatch: 64, peakBytes: 10e9 }]);
 * if (fit !== null) largestUnder(fit, 12e9, []).microBatch; // 78: peak 2 GB + 125 MB × m, 2 % of the cap kept free
 * ```
 * @module
 */
import { mean } from "../stats.ts";

/** One measured peak: a trial that ran at `microBatch` and held at most `peakBytes`. */
export interface MemoryPoint {
  microBatch: number;
  peakBytes: number;
}

/** A least-squares line through measured peaks, with what is needed for its prediction interval. */
export interface MemoryLineFit {
  interceptBytes: number;
  bytesPerSample: number;
  /** measurements used (repeats at the same micro-batch each count) */
  points: number;
  /** distinct micro-batches among them */
  distinct: number;
  /** residual standard deviation sqrt(Σr² / (n − 2)); null with two measurements (no degrees of freedom left) */
  residualSigmaBytes: number | null;
  meanMicroBatch: number;
  /** Σ (m − mean)² over the measurements */
  spreadSquares: number;
  /** Σ r² over the measurements */
  residualSquares: number;
  meanPeakBytes: number;
}

/** The share of the cap always kept free, however tight the line fits. */
export const MARGIN_FLOOR = 0.02;
/** The share of the cap kept free when a single measured peak is all there is (no line yet). */
export const MARGIN_SINGLE = 0.05;
/** Prior guess of how much a measured peak varies, as a share of the peak: peaks are assumed to scatter this much until measurements say otherwise. */
export const PEAK_NOISE_PRIOR = 0.005;
/** How many measurements the prior guess is worth. */
export const PRIOR_DF = 2;

// one-sided 99 % quantiles of Student's t by degrees of freedom; beyond the table the normal 2.326
const T99: readonly (readonly [number, number])[] = [
  [1, 31.82],
  [2, 6.965],
  [3, 4.541],
  [4, 3.747],
  [5, 3.365],
  [6, 3.143],
  [7, 2.998],
  [8, 2.896],
  [9, 2.821],
  [10, 2.764],
  [15, 2.602],
  [20, 2.528],
  [30, 2.457],
  [60, 2.39],
];

/**
 * The one-sided 99 % quantile of Student's t with `df` degrees of freedom (table, stepping to the
 * next smaller tabulated df, which errs on the safe side).
 *
 * @example
 * ```ts
 * t99(1); // 31.82
 * t99(1000); // 2.326
 * ```
 */
export function t99(df: number): number {
  if (df > 60) return 2.326;
  let value = T99[0]?.[1] ?? 31.82;
  for (const [d, t] of T99) if (d <= df) value = t;
  return value;
}

/**
 * Least-squares fit of peak = a + b × micro-batch. Needs two distinct micro-batches; returns null
 * otherwise.
 *
 * @example
 * ```ts
 * fitMemoryLine([{ microBatch: 1, peakBytes: 110 }, { microBatch: 3, peakBytes: 130 }]); // a 100, b 10, residual σ null
 * ```
 */
export function fitMemoryLine(points: readonly MemoryPoint[]): MemoryLineFit | null {
  const n = points.length;
  const distinct = new Set(points.map((p) => p.microBatch)).size;
  if (distinct < 2) return null;
  const meanX = mean(points.map((p) => p.microBatch)) ?? 0;
  const meanY = mean(points.map((p) => p.peakBytes)) ?? 0;
  let sxx = 0;
  let sxy = 0;
  for (const p of points) {
    sxx += (p.microBatch - meanX) ** 2;
    sxy += (p.microBatch - meanX) * (p.peakBytes - meanY);
  }
  const b = sxy / sxx;
  const a = meanY - b * meanX;
  let ssr = 0;
  for (const p of points) ssr += (p.peakBytes - (a + b * p.microBatch)) ** 2;
  return {
    interceptBytes: a,
    bytesPerSample: b,
    points: n,
    distinct,
    residualSigmaBytes: n > 2 ? Math.sqrt(ssr / (n - 2)) : null,
    meanMicroBatch: meanX,
    spreadSquares: sxx,
    residualSquares: ssr,
    meanPeakBytes: meanY,
  };
}

/**
 * The line's predicted peak at `microBatch`.
 *
 * @example
 * ```ts
 * predictPeak(fit, 64); // a + 64 b
 * ```
 */
export function predictPeak(fit: MemoryLineFit, microBatch: number): number {
  return fit.interceptBytes + fit.bytesPerSample * microBatch;
}

/**
 * The standard deviation of a measured peak around the line: the residuals' Σr² over n − 2 degrees of
 * freedom pooled with a prior guess ({@link PEAK_NOISE_PRIOR} of the mean peak, worth {@link PRIOR_DF}
 * measurements), and the degrees of freedom of the pooled estimate.
 *
 * @example
 * ```ts
 * peakSigma(fit); // { sigmaBytes: ..., df: fit.points - 2 + PRIOR_DF }
 * ```
 */
export function peakSigma(fit: MemoryLineFit): { sigmaBytes: number; df: number } {
  const prior = PEAK_NOISE_PRIOR * Math.abs(fit.meanPeakBytes);
  const df = fit.points - 2;
  return { sigmaBytes: Math.sqrt((fit.residualSquares + PRIOR_DF * prior ** 2) / (df + PRIOR_DF)), df: df + PRIOR_DF };
}

/**
 * Bytes to keep free under the cap when running `microBatch` on this line:
 *
 *   margin(m) = max(floor × cap, t99(df) × σ × √(1 + 1/n + (m − m̄)² / Sxx), cap − line(f) for each failed f)
 *
 * σ and df from {@link peakSigma}; the square root widens the upper 99 % prediction bound of a new
 * measurement as m moves away from the measured range; a micro-batch `f` that did not fit although
 * the line put it under the cap proves the line at least cap − line(f) too low there.
 *
 * @example
 * ```ts
 * marginAt(fit, 96, 12 * 2 ** 30, [128]);
 * ```
 */
export function marginAt(fit: MemoryLineFit, microBatch: number, capBytes: number, memoryFailures: readonly number[]): number {
  const { sigmaBytes, df } = peakSigma(fit);
  const spread = Math.sqrt(1 + 1 / fit.points + (microBatch - fit.meanMicroBatch) ** 2 / fit.spreadSquares);
  let margin = Math.max(MARGIN_FLOOR * capBytes, t99(df) * sigmaBytes * spread);
  // one byte more than the gap: the failed micro-batch itself must not count as fitting
  for (const f of memoryFailures) margin = Math.max(margin, capBytes - predictPeak(fit, f) + 1);
  return margin;
}

/** The largest micro-batch the line allows under a cap, and the margin kept there. */
export interface LineLimit {
  microBatch: number;
  marginBytes: number;
  predictedPeakBytes: number;
}

/**
 * The largest micro-batch m (≥ 0; 0 when not even 1 fits) with line(m) + margin(m) ≤ cap, searched up
 * to `upTo`. A line that does not rise (noise hid the slope) is taken as flat at the mean peak: the
 * widening margin then bounds how far the measurements may be trusted.
 *
 * @example
 * ```ts
 * largestUnder(fit, 12 * 2 ** 30, []).microBatch; // e.g. 290
 * ```
 */
export function largestUnder(fit: MemoryLineFit, capBytes: number, memoryFailures: readonly number[], upTo = 2 ** 24): LineLimit {
  const rising = fit.bytesPerSample > 0;
  const line = (m: number): number => (rising ? predictPeak(fit, m) : fit.meanPeakBytes);
  const fits = (m: number): boolean => line(m) + marginAt(fit, m, capBytes, memoryFailures) <= capBytes;
  const at = (m: number): LineLimit => ({ microBatch: m, marginBytes: marginAt(fit, m, capBytes, memoryFailures), predictedPeakBytes: line(m) });
  // beyond the mean micro-batch both the line and the margin grow, so the predicate turns false once
  let low = Math.min(upTo, Math.max(1, Math.floor(fit.meanMicroBatch)));
  if (!fits(low)) {
    while (low > 0 && !fits(low)) low = Math.floor(low / 2);
    return at(low);
  }
  let high = low;
  while (high < upTo && fits(high)) {
    low = high;
    high = Math.min(upTo, high * 2);
  }
  if (fits(high)) return at(high);
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (fits(mid)) low = mid;
    else high = mid;
  }
  return at(low);
}
