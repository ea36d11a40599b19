/**
 * The effective batch that really runs: samples per optimizer step = micro-batch × accumulation.
 * The accumulation is what the job reported per step (the attach counts the batches fetched between
 * two optimizer steps), else the knob's value, else 1: a job that accumulates in its code (an
 * `Accelerator(gradient_accumulation_steps=16)`) has an effective batch 16 × its micro-batch whether
 * or not brim can change the 16. Pure.
 *
 * @example
 * ```ts
 * effectiveBatchOf({ batch_size: 208 }, { accumulation: 16 }); // 3328
 * ```
 * @module
 */
import type { Knobs } from "./types.ts";

/** The micro-batch and accumulation knob names (also exported by space.ts). */
const MICRO = "batch_size";
const ACCUMULATION = "accumulation";

/** What a trial saw of its own steps (the medians over its steady steps). */
export interface SeenBatch {
  accumulation?: number | null;
  microBatch?: number | null;
}

/**
 * Batches per optimizer step: as the job reported it, else the knob, else 1.
 *
 * @example
 * ```ts
 * accumulationOf({ batch_size: 16, accumulation: 4 }, null); // 4
 * accumulationOf({ batch_size: 16 }, { accumulation: 16 }); // 16
 * ```
 */
export function accumulationOf(knobs: Knobs, seen: SeenBatch | null | undefined): number {
  const reported = seen?.accumulation;
  if (typeof reported === "number" && reported >= 1) return reported;
  const knob = knobs[ACCUMULATION];
  return typeof knob === "number" && knob >= 1 ? knob : 1;
}

/**
 * Samples per optimizer step: the micro-batch (the knob, else what the job reported) × {@link accumulationOf}; null without a micro-batch.
 *
 * @example
 * ```ts
 * effectiveBatchOf({ batch_size: 64, accumulation: 1 }, { accumulation: 1 }); // 64
 * effectiveBatchOf({ batch_size: 208 }, { accumulation: 16 }); // 3328
 * ```
 */
export function effectiveBatchOf(knobs: Knobs, seen: SeenBatch | null | undefined): number | null {
  const knob = knobs[MICRO];
  const micro = typeof knob === "number" ? knob : typeof seen?.microBatch === "number" ? seen.microBatch : null;
  return micro === null ? null : micro * accumulationOf(knobs, seen);
}
