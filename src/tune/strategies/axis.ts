/**
 * The micro-batch axis of a tune space: which micro-batches may be run, how a micro-batch (and the
 * accumulation that keeps the effective batch) is written into knobs, and what the rest of the knobs
 * (the "context") is.
 *
 * @example
 * ```ts
 * const axis = new MicroAxis({ baseline: { bs: 8, acc: 8 }, microBatch: { knob: "bs" }, accumulation: { knob: "acc" }, effectiveBatch: 64, others: [] });
 * axis.knobsAt({ lr: 1 }, 16); // { lr: 1, bs: 16, acc: 4 }
 * ```
 * @module
 */
import { InputError } from "../../errors/index.ts";
import type { Knobs, TuneSpace } from "../types.ts";

/** The largest micro-batch any search considers without an explicit `max`. */
export const MICRO_BATCH_CEILING = 2 ** 24;

/**
 * A tune space's micro-batch knob, its allowed values, and the accumulation that goes with each.
 *
 * @example
 * ```ts
 * const axis = new MicroAxis({ baseline: { bs: 8 }, microBatch: { knob: "bs", max: 512 }, others: [] });
 * axis.atMost(1000); // 512
 * axis.between(32, 128, 64); // 64
 * ```
 */
export class MicroAxis {
  readonly knob: string | undefined;
  readonly accumulationKnob: string | undefined;
  readonly effectiveBatch: number | undefined;
  readonly min: number;
  readonly max: number;
  /** the allowed micro-batches when they are few (an explicit list, divisors of the effective batch), ascending */
  readonly values: readonly number[] | undefined;
  /** the user listed the micro-batches: try exactly those */
  readonly explicit: boolean;

  constructor(space: TuneSpace) {
    this.knob = space.microBatch?.knob;
    this.accumulationKnob = space.accumulation?.knob;
    this.effectiveBatch = space.effectiveBatch;
    const min = space.microBatch?.min ?? 1;
    const max = space.microBatch?.max ?? MICRO_BATCH_CEILING;
    if (!Number.isInteger(min) || min < 1) throw new InputError(`must be a positive integer, got ${min}`, { field: "microBatch.min" });
    if (!Number.isInteger(max) || max < min)
      throw new InputError(`must be an integer at least microBatch.min (${min}), got ${max}`, { field: "microBatch.max" });
    this.min = min;
    this.max = max;
    const listed = space.microBatch?.values;
    this.explicit = listed !== undefined;
    let values: number[] | undefined =
      listed === undefined ? undefined : [...new Set(listed)].filter((m) => Number.isInteger(m) && m >= min && m <= max).sort((a, b) => a - b);
    if (values !== undefined && values.length === 0)
      throw new InputError(`none of the listed micro-batches lies within ${min}..${max}`, { field: "microBatch.values" });
    const e = space.effectiveBatch;
    if (e !== undefined) {
      if (!Number.isInteger(e) || e < 1) throw new InputError(`must be a positive integer, got ${e}`, { field: "effectiveBatch" });
      if (this.knob === undefined) throw new InputError("a fixed effective batch needs a micro-batch knob", { field: "effectiveBatch" });
      if (this.accumulationKnob === undefined)
        throw new InputError("a fixed effective batch needs an accumulation knob to make up micro × accumulation", { field: "effectiveBatch" });
      const divisors: number[] = [];
      for (let d = 1; d <= e; d++) if (e % d === 0 && d >= min && d <= max && (values === undefined || values.includes(d))) divisors.push(d);
      if (divisors.length === 0)
        throw new InputError(`no divisor of ${e} lies within micro-batch ${min}..${max}${values === undefined ? "" : " among the listed values"}`, {
          field: "effectiveBatch",
        });
      values = divisors;
    }
    this.values = values;
    for (const other of space.others) {
      if (other.knob === this.knob || other.knob === this.accumulationKnob) {
        throw new InputError(`knob ${other.knob} is the micro-batch or accumulation knob; list it only there`, { field: "others" });
      }
    }
  }

  /** The micro-batch in `knobs`, or null when there is no micro-batch knob or its value is not a positive integer. */
  microOf(knobs: Knobs): number | null {
    if (this.knob === undefined) return null;
    const v = knobs[this.knob];
    const n = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : NaN;
    return Number.isInteger(n) && n >= 1 ? n : null;
  }

  /** The knobs without the micro-batch and accumulation: what the memory line and the throughput curve depend on besides m. */
  contextOf(knobs: Knobs): Knobs {
    const out: Knobs = {};
    for (const [k, v] of Object.entries(knobs)) if (k !== this.knob && k !== this.accumulationKnob) out[k] = v;
    return out;
  }

  /** `context` with micro-batch `m` (and, under a fixed effective batch, its accumulation). */
  knobsAt(context: Knobs, m: number): Knobs {
    const out: Knobs = { ...context };
    if (this.knob !== undefined) out[this.knob] = m;
    if (this.effectiveBatch !== undefined && this.accumulationKnob !== undefined) out[this.accumulationKnob] = this.effectiveBatch / m;
    return out;
  }

  /** Whether micro-batch `m` may be run. */
  allows(m: number): boolean {
    if (!Number.isInteger(m) || m < this.min || m > this.max) return false;
    if (this.values !== undefined) return this.values.includes(m);
    return this.effectiveBatch === undefined || this.effectiveBatch % m === 0;
  }

  /** The smallest allowed micro-batch. */
  lowest(): number {
    return this.values?.[0] ?? this.min;
  }

  /** The largest allowed micro-batch ≤ x, or null. */
  atMost(x: number): number | null {
    if (this.values !== undefined) {
      let found: number | null = null;
      for (const v of this.values) if (v <= x) found = v;
      return found;
    }
    const m = Math.min(this.max, Math.floor(x));
    return m >= this.min ? m : null;
  }

  /** The smallest allowed micro-batch ≥ x, or null. */
  atLeast(x: number): number | null {
    if (this.values !== undefined) return this.values.find((v) => v >= x) ?? null;
    const m = Math.max(this.min, Math.ceil(x));
    return m <= this.max ? m : null;
  }

  /** The allowed micro-batch strictly between lo and hi nearest to x, or null when none lies between. */
  between(lo: number, hi: number, x: number): number | null {
    const inside = (m: number | null): m is number => m !== null && m > lo && m < hi;
    const down = this.atMost(x);
    const up = this.atLeast(x);
    const options = [down, up].filter(inside);
    if (options.length === 0) {
      const first = this.atLeast(lo + 1);
      return inside(first) ? first : null;
    }
    return options.reduce((a, b) => (Math.abs(a - x) <= Math.abs(b - x) ? a : b));
  }
}

/**
 * A stable text key of knobs, the same whatever the order of their keys.
 *
 * @example
 * ```ts
 * knobsKey({ b: 1, a: "x" }) === knobsKey({ a: "x", b: 1 }); // true
 * ```
 */
export function knobsKey(knobs: Knobs): string {
  return JSON.stringify(
    Object.keys(knobs)
      .sort()
      .map((k) => [k, knobs[k]]),
  );
}
