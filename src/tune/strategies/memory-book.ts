/**
 * Which configurations share a memory line. Knobs that do not change memory (say `pin_memory`) put
 * their trials on the line of the configuration they were compared with; a knob value that moves the
 * peak off that line by more than the margin (say a lower precision) starts a line of its own.
 *
 * @example
 * ```ts
 * const book = new MemoryBook(ledger, axis, capBytes);
 * const family = book.open(axis.contextOf(space.baseline));
 * book.limit(family)?.microBatch; // largest micro-batch the line allows, once two micro-batches ran
 * ```
 * @module
 */
import { fitMemoryLine, largestUnder, marginAt, predictPeak, type LineLimit, type MemoryLineFit, type MemoryPoint } from "../memory-line.ts";
import type { Knobs, SearchTrial } from "../types.ts";
import { knobsKey, type MicroAxis } from "./axis.ts";
import { didNotFit, peakOf, ranAsGiven, type Ledger } from "./ledger.ts";

/**
 * Memory lines by family of contexts (knobs other than micro-batch and accumulation).
 *
 * @example
 * ```ts
 * const family = book.open({ precision: "fp32" });
 * book.join({ precision: "fp32", pin_memory: true }, family); // same memory, same line
 * book.predict(family, 64); // { peakBytes, marginBytes } once two micro-batches ran
 * ```
 */
export class MemoryBook {
  private readonly families = new Map<string, number>();
  private count = 0;
  private readonly ledger: Ledger;
  private readonly axis: MicroAxis;
  private readonly capBytes: number;

  constructor(ledger: Ledger, axis: MicroAxis, capBytes: number) {
    this.ledger = ledger;
    this.axis = axis;
    this.capBytes = capBytes;
  }

  /** The family of `context`, if it has one. */
  familyOf(context: Knobs): number | undefined {
    return this.families.get(knobsKey(context));
  }

  /** Starts a new family with `context` in it. */
  open(context: Knobs): number {
    const id = this.count++;
    this.families.set(knobsKey(context), id);
    return id;
  }

  /** Puts `context` on the line of `family`. */
  join(context: Knobs, family: number): void {
    this.families.set(knobsKey(context), family);
  }

  /** Trials of the family that carry a micro-batch. */
  trials(family: number): SearchTrial[] {
    return this.ledger.trials.filter((t) => this.axis.microOf(t.knobs) !== null && this.families.get(knobsKey(this.axis.contextOf(t.knobs))) === family);
  }

  /** Measured peaks of the family's trials that ran as given. */
  points(family: number): MemoryPoint[] {
    const out: MemoryPoint[] = [];
    for (const t of this.trials(family)) {
      const peak = peakOf(t.result);
      const m = this.axis.microOf(t.knobs);
      if (ranAsGiven(t.result) && peak !== null && m !== null) out.push({ microBatch: m, peakBytes: peak });
    }
    return out;
  }

  /** Trials of the family that did not fit in memory (OOM, cap, an SDK split). */
  memoryFailures(family: number): SearchTrial[] {
    return this.trials(family).filter((t) => didNotFit(t.result));
  }

  /** The micro-batches of {@link memoryFailures}. */
  failedMicroBatches(family: number): number[] {
    return this.memoryFailures(family).map((t) => this.axis.microOf(t.knobs) ?? Infinity);
  }

  /** The family's fitted line, or null before two micro-batches ran. */
  fit(family: number): MemoryLineFit | null {
    return fitMemoryLine(this.points(family));
  }

  /** The largest micro-batch the family's line allows under the cap. */
  limit(family: number): (LineLimit & { fit: MemoryLineFit }) | null {
    const fit = this.fit(family);
    if (fit === null) return null;
    return { ...largestUnder(fit, this.capBytes, this.failedMicroBatches(family), this.axis.max), fit };
  }

  /** The line's prediction and margin at micro-batch `m`, or null without a line. */
  predict(family: number, m: number): { peakBytes: number; marginBytes: number } | null {
    const fit = this.fit(family);
    if (fit === null) return null;
    return { peakBytes: predictPeak(fit, m), marginBytes: marginAt(fit, m, this.capBytes, this.failedMicroBatches(family)) };
  }
}
