/**
 * Brim's statistics, one home for each: the mean, largest and smallest of a list, its median, and
 * the median of a stream in bounded memory.
 *
 * @module
 */

/**
 * The mean of a list, or null when empty.
 *
 * @example
 * ```ts
 * mean([1, 2, 6]); // 3
 * ```
 */
export function mean(values: readonly number[]): number | null {
  return values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length;
}

/**
 * The largest of the non-null values, or null when there is none (safe for long lists, unlike
 * `Math.max(...values)`).
 *
 * @example
 * ```ts
 * maxOf([3, null, 7]); // 7
 * ```
 */
export function maxOf(values: readonly (number | null)[]): number | null {
  let best: number | null = null;
  for (const v of values) if (v !== null && (best === null || v > best)) best = v;
  return best;
}

/**
 * The smallest of the non-null values, or null when there is none.
 *
 * @example
 * ```ts
 * minOf([3, null, 7]); // 3
 * ```
 */
export function minOf(values: readonly (number | null)[]): number | null {
  let best: number | null = null;
  for (const v of values) if (v !== null && (best === null || v < best)) best = v;
  return best;
}

/**
 * The median of numbers (the mean of the middle two for an even count); null when there are none.
 *
 * @example
 * ```ts
 * median([3, 1, 2]);    // 2
 * median([4, 1, 2, 3]); // 2.5
 * median([]);           // null
 * ```
 */
export function median(values: ArrayLike<number>): number | null {
  const n = values.length;
  if (n === 0) return null;
  const sorted = Float64Array.from(values).sort();
  const mid = n >> 1;
  return n % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/**
 * The median of a stream of numbers in bounded memory: exact up to 2^18 values, then from a
 * histogram with bins 0.5 % wide (so within 0.25 % of the exact median).
 *
 * @example
 * ```ts
 * const m = new StreamingMedian();
 * for (const s of [0.2, 0.1, 0.3]) m.add(s);
 * m.median(); // 0.2
 * ```
 */
export class StreamingMedian {
  static readonly EXACT = 1 << 18;
  #values: Float64Array = new Float64Array(1024);
  #n = 0;
  #bins: Map<number, number> | null = null;
  #zeros = 0;

  add(value: number): void {
    if (this.#bins === null) {
      if (this.#n === this.#values.length) {
        if (this.#n >= StreamingMedian.EXACT) {
          this.#bins = new Map();
          for (let i = 0; i < this.#n; i++) this.#bin(this.#values[i] as number);
          this.#values = new Float64Array(0);
        } else {
          const grown = new Float64Array(this.#values.length * 2);
          grown.set(this.#values);
          this.#values = grown;
        }
      }
      if (this.#bins === null) {
        this.#values[this.#n] = value;
        this.#n++;
        return;
      }
    }
    this.#n++;
    this.#bin(value);
  }

  #bin(value: number): void {
    if (value <= 0) {
      this.#zeros++;
      return;
    }
    const bin = Math.floor(Math.log(value) / Math.log1p(0.005));
    this.#bins?.set(bin, (this.#bins.get(bin) ?? 0) + 1);
  }

  get count(): number {
    return this.#n;
  }

  median(): number | null {
    if (this.#n === 0) return null;
    if (this.#bins === null) {
      return median(this.#values.subarray(0, this.#n));
    }
    let seen = this.#zeros;
    if (seen > this.#n / 2) return 0;
    for (const [bin, n] of [...this.#bins.entries()].sort((a, b) => a[0] - b[0])) {
      seen += n;
      if (seen >= this.#n / 2) return Math.exp((bin + 0.5) * Math.log1p(0.005));
    }
    return null;
  }
}
