/**
 * Micro-batches that divide the job's global batch (issue 36: accumulation derived from a budget).
 *
 * Some jobs fix the batch per optimizer step and derive their accumulation from it: litgpt's
 * `train.global_batch_size // train.micro_batch_size` (an assertion when it comes to 0, a smaller
 * effective batch when it does not divide), nanoGPT-style `total_batch_size // (B * T)` with an
 * `assert ... % ... == 0`. Varying the micro-batch there varies the accumulation; a value that does
 * not divide crashes the trial or silently changes the effective batch. The tune keeps to the
 * divisors of the global batch per rank, and says the effective batch it keeps.
 */
import type { ConfigDocument } from "../configs/types.ts";

/** The keys a config holds a global batch under, beside its micro-batch key. */
export const GLOBAL_BATCH_KEYS: readonly string[] = ["global_batch_size", "total_batch_size", "effective_batch_size", "batch_size_per_step"];

/** A global batch the job derives its accumulation from, and where brim found it. */
export interface GlobalBatch {
  /** samples (or tokens, when `per` says so) per optimizer step, over all ranks */
  value: number;
  /** where it came from, for people: a config key, or trial 0's steps */
  from: string;
}

const positiveInteger = (value: unknown): number | null => (typeof value === "number" && Number.isInteger(value) && value > 0 ? value : null);

/**
 * The global batch a config holds in the same mapping as the micro-batch knob's key.
 *
 * @example
 * ```ts
 * globalBatchBeside({ get: (k) => (k === "train.global_batch_size" ? 8 : undefined) }, "train.micro_batch_size");
 * // { value: 8, from: "train.global_batch_size" }
 * ```
 */
export function globalBatchBeside(doc: Pick<ConfigDocument, "get">, microKey: string): GlobalBatch | null {
  const dot = microKey.lastIndexOf(".");
  const parent = dot < 0 ? "" : microKey.slice(0, dot + 1);
  for (const name of GLOBAL_BATCH_KEYS) {
    const key = `${parent}${name}`;
    if (key === microKey) continue;
    const value = positiveInteger(doc.get(key));
    if (value !== null) return { value, from: key };
  }
  return null;
}

/**
 * The global batch trial 0 showed when the job accumulates in its code with no knob for it (the
 * attach counted `accumulation` batches of `micro` per optimizer step): micro × accumulation.
 *
 * @example
 * ```ts
 * globalBatchObserved(4, 2); // { value: 8, from: "trial 0: 2 batches of 4 per optimizer step" }
 * globalBatchObserved(4, 1); // null
 * ```
 */
export function globalBatchObserved(micro: unknown, accumulation: number | undefined): GlobalBatch | null {
  const m = positiveInteger(micro);
  if (m === null || accumulation === undefined || !Number.isInteger(accumulation) || accumulation <= 1) return null;
  return { value: m * accumulation, from: `trial 0: ${accumulation} batches of ${m} per optimizer step` };
}

/**
 * The micro-batches that divide `global` over `ranks` ranks, within [min, max], ascending.
 *
 * @example
 * ```ts
 * dividingMicroBatches(8, 1, { min: 1 }); // [1, 2, 4, 8]
 * dividingMicroBatches(48, 2, { min: 2, max: 12 }); // [2, 3, 4, 6, 8, 12]
 * ```
 */
export function dividingMicroBatches(global: number, ranks: number, range: { min?: number; max?: number }): number[] {
  const perRank = global / Math.max(1, ranks);
  if (!Number.isInteger(perRank) || perRank < 1) return [];
  const out: number[] = [];
  for (let d = 1; d <= perRank; d++) if (perRank % d === 0 && d >= (range.min ?? 1) && d <= (range.max ?? Infinity)) out.push(d);
  return out;
}

/**
 * The value of `allowed` nearest to `wanted` (the smaller on a tie), for a search that proposes any
 * micro-batch; null when none is allowed.
 *
 * @example
 * ```ts
 * nearestDividing(10, [1, 2, 4, 8]); // 8
 * nearestDividing(3, [1, 2, 4, 8]); // 2
 * ```
 */
export function nearestDividing(wanted: number, allowed: readonly number[]): number | null {
  let best: number | null = null;
  for (const value of allowed) if (best === null || Math.abs(value - wanted) < Math.abs(best - wanted)) best = value;
  return best;
}

/**
 * The one line the tune prints when it keeps to the divisors: which values, and the effective batch kept.
 *
 * @example
 * ```ts
 * keptBatchLine({ value: 8, from: "train.global_batch_size" }, 1, [1, 2, 4, 8]);
 * // "micro-batch: only values that divide train.global_batch_size = 8 (1, 2, 4, 8): the job derives its accumulation from it, so the effective batch stays 8"
 * ```
 */
export function keptBatchLine(global: GlobalBatch, ranks: number, values: readonly number[]): string {
  const per = ranks > 1 ? ` over ${ranks} ranks (${global.value / ranks} each)` : "";
  return `micro-batch: only values that divide ${global.from} = ${global.value}${per} (${values.join(", ")}): the job derives its accumulation from it, so the effective batch stays ${global.value}`;
}

// an assertion on a remainder or an accumulation, or an error that names divisibility
const DIVISIBILITY = [
  /\bdivisible\b|\bdoes not divide\b|\bmust divide\b|\bnot a multiple\b|\bmultiple of\b/i,
  /^\s*assert\b.*%.*==\s*0/,
  /^\s*assert\b.*(?:accum|grad_acc|gradient_accumulation|batch_size).*>\s*0/i,
];

/**
 * Whether a failed trial's last output lines say it died on a micro-batch that does not divide the
 * job's batch (the traceback's assertion, or an error naming divisibility): the line that says so,
 * else null. The tune then keeps to the divisors instead of counting it as a failure of the value's size.
 *
 * @example
 * ```ts
 * divisibilityFailure(["  File \"train.py\", line 40, in <module>", "    assert total_batch_size % (B * T) == 0", "AssertionError"]);
 * // "assert total_batch_size % (B * T) == 0"
 * divisibilityFailure(["RuntimeError: CUDA out of memory"]); // null
 * ```
 */
export function divisibilityFailure(tail: readonly string[]): string | null {
  const last = tail.slice(-40);
  if (!last.some((line) => /\b(?:AssertionError|ValueError|RuntimeError)\b/.test(line))) return null;
  for (let i = last.length - 1; i >= 0; i--) {
    const line = last[i] ?? "";
    if (DIVISIBILITY.some((re) => re.test(line))) return line.trim();
  }
  return null;
}
