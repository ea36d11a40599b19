import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compareThroughput, gapBound, NOISE_FLOOR, noiseThreshold, pickFastest, trialNoise, withinTrialNoise } from "../../src/tune/strategies/noise.ts";

describe("noise", () => {
  it("within a trial: the standard error of the mean step time, relative", () => {
    expect(withinTrialNoise([0.1, 0.1])).toBeNull();
    expect(withinTrialNoise([0.1, 0.1, 0.1, 0.1])).toBe(0);
    const steps = [0.1, 0.11, 0.09, 0.1];
    const sd = Math.sqrt((0.0001 + 0.0001) / 3);
    expect(withinTrialNoise(steps)).toBeCloseTo(sd / 0.1 / 2, 10);
  });

  it("within a trial of many steps: batch means, so that steps taking turns (JAX's asynchronous dispatch) are not taken for noise", () => {
    // one step in two waits for the queued work: the trial's mean is steady, the single steps are not
    const turns = Array.from({ length: 60 }, (_, i) => (i % 2 === 1 ? 0.05 : 0.001));
    expect(withinTrialNoise(turns)).toBeCloseTo(0, 12);
    const independent = Math.sqrt(turns.reduce((s, x) => s + (x - 0.0255) ** 2, 0) / 59) / 0.0255 / Math.sqrt(60);
    expect(independent).toBeGreaterThan(0.12);
    // six blocks of ten: the spread of the blocks' means over √6
    const drift = Array.from({ length: 60 }, (_, i) => 0.1 + Math.floor(i / 10) * 0.01);
    const means = [0.1, 0.11, 0.12, 0.13, 0.14, 0.15];
    const sd = Math.sqrt(means.reduce((s, x) => s + (x - 0.125) ** 2, 0) / 5);
    expect(withinTrialNoise(drift)).toBeCloseTo(sd / 0.125 / Math.sqrt(6), 10);
  });

  it("of a trial: repeats with three degrees of freedom or more are the noise; the within-trial error stood in for them", () => {
    // mingpt-chargpt's trials: a 23 % within-trial error, repeats that agree within 2 %
    const repeats = [
      [380, 372],
      [671, 683],
      [662, 671],
      [483, 487],
    ];
    expect(trialNoise([0.233], repeats)).toBeLessThan(0.02);
    expect(trialNoise([0.233], repeats.slice(0, 2))).toBe(0.233);
  });

  it("of a trial: the floor, the median within-trial error, or the spread of repeats, whichever is largest", () => {
    expect(trialNoise([], [])).toBe(NOISE_FLOOR);
    expect(trialNoise([0.001, 0.02, 0.03], [])).toBe(0.02);
    const repeats = trialNoise([0.001], [[1000, 1100]]);
    expect(repeats).toBeCloseTo(Math.sqrt(((1000 / 1050 - 1) ** 2 + (1100 / 1050 - 1) ** 2) / 1), 10);
  });

  it("two means differ when they are more than 2 standard errors of the difference apart", () => {
    expect(noiseThreshold({ mean: 1, count: 1 }, { mean: 1, count: 1 }, 0.01)).toBeCloseTo(0.02 * Math.SQRT2, 12);
    expect(compareThroughput({ mean: 1030, count: 1 }, { mean: 1000, count: 1 }, 0.01)).toBe("better");
    expect(compareThroughput({ mean: 1020, count: 1 }, { mean: 1000, count: 1 }, 0.01)).toBe("tie");
    expect(compareThroughput({ mean: 970, count: 1 }, { mean: 1000, count: 1 }, 0.01)).toBe("worse");
    expect(compareThroughput({ mean: 1020, count: 4 }, { mean: 1000, count: 4 }, 0.01)).toBe("better");
  });

  it("the winner among ties is the one measured most often, then the faster", () => {
    const a = { mean: 1000, count: 2, name: "a" };
    const b = { mean: 1008, count: 1, name: "b" };
    const c = { mean: 900, count: 5, name: "c" };
    expect(pickFastest([a, b, c], 0.01)?.name).toBe("a");
    expect(pickFastest([b, c], 0.01)?.name).toBe("b");
    expect(pickFastest([{ ...a, count: 1 }, b], 0.01)?.name).toBe("b");
    expect(pickFastest([], 0.01)).toBeNull();
  });
});

describe("the concave gap bound", () => {
  const curve = (o: number, c: number) => (m: number) => m / (o + c * m);
  it("bounds a concave throughput curve inside every gap", () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.001, max: 0.1, noNaN: true }),
        fc.double({ min: 1e-5, max: 1e-2, noNaN: true }),
        fc.uniqueArray(fc.integer({ min: 1, max: 512 }), { minLength: 3, maxLength: 7 }),
        (o, c, xs) => {
          const f = curve(o, c);
          const points = [...xs].sort((a, b) => a - b).map((x) => ({ x, y: f(x) }));
          for (let i = 0; i + 1 < points.length; i++) {
            const lo = points[i]?.x ?? 0;
            const hi = points[i + 1]?.x ?? 0;
            const { bound } = gapBound(points, i, lo, hi);
            for (let k = 1; k < 8; k++) {
              const x = lo + ((hi - lo) * k) / 8;
              expect(f(x)).toBeLessThanOrEqual(bound * (1 + 1e-9));
            }
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it("is unbounded with no neighbouring pair, and peaks where the lines cross", () => {
    const pts = [
      { x: 8, y: 600 },
      { x: 32, y: 1600 },
    ];
    expect(gapBound(pts, 0, 8, 32).bound).toBe(Infinity);
    const knee = [
      { x: 8, y: 600 },
      { x: 32, y: 1600 },
      { x: 128, y: 1100 },
      { x: 256, y: 700 },
    ];
    // in (32, 128) the line back from (128, 256) is the lower one: its highest point is at 32
    expect(gapBound(knee, 1, 32, 128)).toEqual({ bound: 1400, at: 32 });
    // above the last point only the line through the last two bounds it
    expect(gapBound(knee, 3, 256, 300)).toEqual({ bound: 700, at: 256 });
    const peak = [
      { x: 8, y: 600 },
      { x: 32, y: 1600 },
      { x: 64, y: 1800 },
      { x: 128, y: 1100 },
    ];
    const left = (x: number): number => 1600 + (1000 / 24) * (x - 32);
    const right = (x: number): number => 1800 + (-700 / 64) * (x - 64);
    const g = gapBound(peak, 1, 32, 64);
    expect(g.at).toBeGreaterThan(32);
    expect(g.at).toBeLessThan(64);
    expect(left(g.at ?? 0)).toBeCloseTo(right(g.at ?? 0), 6);
    expect(g.bound).toBeCloseTo(left(g.at ?? 0), 6);
  });
});
