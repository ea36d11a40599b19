import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  fitMemoryLine,
  largestUnder,
  MARGIN_FLOOR,
  marginAt,
  PEAK_NOISE_PRIOR,
  peakSigma,
  predictPeak,
  t99,
  type MemoryPoint,
} from "../../src/tune/memory-line.ts";
import { gaussian, seeded } from "./oracle.ts";

const GiB = 2 ** 30;
const MiB = 2 ** 20;
const cap = 16 * GiB;
const line = (a: number, b: number, ms: number[]): MemoryPoint[] => ms.map((m) => ({ microBatch: m, peakBytes: a + b * m }));

describe("the memory line", () => {
  it("is exact on noiseless points, with no residual", () => {
    const fit = fitMemoryLine(line(3 * GiB, 40 * MiB, [8, 32, 100, 140]));
    expect(fit).not.toBeNull();
    expect(fit?.interceptBytes).toBeCloseTo(3 * GiB, 0);
    expect(fit?.bytesPerSample).toBeCloseTo(40 * MiB, 3);
    expect(fit?.residualSigmaBytes).toBeCloseTo(0, 0);
    expect(fit?.points).toBe(4);
  });

  it("needs two distinct micro-batches", () => {
    expect(fitMemoryLine([])).toBeNull();
    expect(fitMemoryLine(line(GiB, MiB, [8, 8, 8]))).toBeNull();
    expect(fitMemoryLine(line(GiB, MiB, [8, 16]))?.residualSigmaBytes).toBeNull();
  });

  it("keeps the floor on noiseless points near the measured range, and widens away from it", () => {
    const fit = fitMemoryLine(line(3 * GiB, 40 * MiB, [8, 32, 100, 140, 200, 250]));
    if (fit === null) throw new Error("no fit");
    expect(marginAt(fit, 200, cap, [])).toBe(MARGIN_FLOOR * cap);
    expect(marginAt(fit, 5000, cap, [])).toBeGreaterThan(MARGIN_FLOOR * cap);
  });

  it("with two points uses the prior guess of peak noise: t99(2) × 0.5 % of the mean peak × the spread", () => {
    const fit = fitMemoryLine(line(3 * GiB, 40 * MiB, [8, 32]));
    if (fit === null) throw new Error("no fit");
    const sigma = PEAK_NOISE_PRIOR * fit.meanPeakBytes;
    expect(peakSigma(fit)).toEqual({ sigmaBytes: expect.closeTo(sigma, 0) as number, df: 2 });
    const spread = Math.sqrt(1 + 1 / 2 + (200 - 20) ** 2 / 288);
    expect(marginAt(fit, 200, cap, [])).toBeCloseTo(t99(2) * sigma * spread, 0);
  });

  it("grows with measured noise, and the limit shrinks", () => {
    const ms = [8, 16, 32, 64, 96, 128, 160, 200];
    const margins: number[] = [];
    const limits: number[] = [];
    for (const noise of [0, 0.005, 0.02, 0.05]) {
      const random = seeded(11);
      const points = ms.map((m) => ({ microBatch: m, peakBytes: (3 * GiB + 40 * MiB * m) * (1 + noise * gaussian(random)) }));
      const fit = fitMemoryLine(points);
      if (fit === null) throw new Error("no fit");
      const limit = largestUnder(fit, cap, []);
      margins.push(limit.marginBytes);
      limits.push(limit.microBatch);
    }
    for (let i = 1; i < margins.length; i++) {
      expect(margins[i]).toBeGreaterThanOrEqual(margins[i - 1] ?? 0);
      expect(limits[i]).toBeLessThanOrEqual(limits[i - 1] ?? Infinity);
    }
    expect(margins[0]).toBe(MARGIN_FLOOR * cap);
    expect(margins[3]).toBeGreaterThan(3 * MARGIN_FLOOR * cap);
  });

  it("is raised by a micro-batch that did not fit although the line put it under the cap", () => {
    const fit = fitMemoryLine(line(3 * GiB, 40 * MiB, [8, 100, 200, 300]));
    if (fit === null) throw new Error("no fit");
    const free = largestUnder(fit, cap, []);
    expect(free.microBatch).toBe(Math.floor((cap * (1 - MARGIN_FLOOR) - 3 * GiB) / (40 * MiB)));
    const failed = largestUnder(fit, cap, [250]);
    expect(marginAt(fit, 100, cap, [250])).toBeCloseTo(cap - predictPeak(fit, 250) + 1, 0);
    expect(failed.microBatch).toBeLessThan(250);
  });

  it("largestUnder returns the largest micro-batch whose line + margin fits", () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 0.7, noNaN: true }),
        fc.double({ min: 1e-5, max: 0.05, noNaN: true }),
        fc.double({ min: 0, max: 0.03, noNaN: true }),
        fc.integer({ min: 1, max: 1000 }),
        (fixedShare, perSampleShare, noise, seed) => {
          const random = seeded(seed);
          const points = [4, 9, 20, 33].map((m) => ({ microBatch: m, peakBytes: cap * (fixedShare + perSampleShare * m) * (1 + noise * gaussian(random)) }));
          const fit = fitMemoryLine(points);
          if (fit === null) return;
          const { microBatch } = largestUnder(fit, cap, [], 4096);
          const total = (m: number): number => (fit.bytesPerSample > 0 ? predictPeak(fit, m) : fit.meanPeakBytes) + marginAt(fit, m, cap, []);
          if (microBatch > 0) expect(total(microBatch)).toBeLessThanOrEqual(cap);
          if (microBatch < 4096 && microBatch >= fit.meanMicroBatch) expect(total(microBatch + 1)).toBeGreaterThan(cap);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("gives a finite limit for a line that does not rise", () => {
    const fit = fitMemoryLine([
      { microBatch: 8, peakBytes: 5 * GiB },
      { microBatch: 12, peakBytes: 4.99 * GiB },
      { microBatch: 10, peakBytes: 5.01 * GiB },
    ]);
    if (fit === null) throw new Error("no fit");
    expect(fit.bytesPerSample).toBeLessThanOrEqual(0);
    const { microBatch } = largestUnder(fit, cap, []);
    expect(microBatch).toBeGreaterThan(12);
    expect(Number.isFinite(microBatch)).toBe(true);
  });

  it("t99 falls with the degrees of freedom toward the normal quantile", () => {
    const dfs = [1, 2, 3, 5, 10, 30, 60, 1000];
    for (let i = 1; i < dfs.length; i++) expect(t99(dfs[i] ?? 0)).toBeLessThan(t99(dfs[i - 1] ?? 0));
    expect(t99(1)).toBeCloseTo(31.82, 2);
    expect(t99(1000)).toBeCloseTo(2.326, 3);
  });
});
