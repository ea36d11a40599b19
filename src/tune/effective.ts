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
import { ACCUMULATION_KNOB, MICRO_BATCH_KNOB } from "../knobs/index.ts";
import type { Knobs, TrialResult } from "./types.ts";

/** An effective-batch change whose samples per step move by a share further than this from it is not trusted. */
export const SAMPLES_TOLERANCE = 0.15;

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
  const knob = knobs[ACCUMULATION_KNOB];
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
  const knob = knobs[MICRO_BATCH_KNOB];
  const micro = typeof knob === "number" ? knob : typeof seen?.microBatch === "number" ? seen.microBatch : null;
  return micro === null ? null : micro * accumulationOf(knobs, seen);
}

/**
 * When the micro-batch changes, the samples a step reports must change with it; a job that counts
 * something else as samples (a sequence-first batch counting time steps) makes samples/s meaningless.
 * Returns the one-line finding, or null when they follow (or cannot be compared).
 *
 * @example
 * ```ts
 * samplesMismatch({ knobs: { batch_size: 32 }, result: { samplesPerStep: 7680, ... } }, { knobs: { batch_size: 128 }, result: { samplesPerStep: 7680, ... } });
 * // "samples per step did not follow the micro-batch: ..."
 * ```
 */
export function samplesMismatch(base: { knobs: Knobs; result: TrialResult }, other: { knobs: Knobs; result: TrialResult }): string | null {
  // samples per optimizer step follow the effective batch (micro × accumulation), not the micro-batch alone
  const e0 = effectiveBatchOf(base.knobs, base.result);
  const e = effectiveBatchOf(other.knobs, other.result);
  const s0 = base.result.samplesPerStep;
  const s = other.result.samplesPerStep;
  if (typeof base.knobs[MICRO_BATCH_KNOB] !== "number" || e0 === null || e === null || e0 === e || s0 == null || s == null || s0 <= 0) return null;
  const expected = e / e0;
  const actual = s / s0;
  if (Math.abs(actual / expected - 1) <= SAMPLES_TOLERANCE) return null;
  // the batch it runs followed, and an epoch's short last batch came often enough to be the median
  const most = other.result.samplesPerStepMax;
  if (most != null && Math.abs(most / s0 / expected - 1) <= SAMPLES_TOLERANCE) return null;
  const what = (knobs: Knobs, result: TrialResult): string => `${String(knobs[MICRO_BATCH_KNOB])} × ${accumulationOf(knobs, result)}`;
  // not a count that moved the wrong way: the very same batch, whatever the knob said
  const m0 = base.result.modelSamplesPerStep;
  const m = other.result.modelSamplesPerStep;
  if (Math.abs(actual - 1) <= SAMPLES_TOLERANCE && m0 != null && m != null && m0 > 0 && Math.abs(m / m0 / expected - 1) <= SAMPLES_TOLERANCE)
    return (
      `${MODEL_WORK_ONLY}: ${what(base.knobs, base.result)} → ${what(other.knobs, other.result)} (×${expected.toFixed(2)}) moved the batch dimension of the model's input ${m0} → ${m}, ` +
      `while the DataLoader's samples per step, which brim counts, stayed ${s0} → ${s}: the knob sizes what the model is fed, not what the loader yields (a library that draws its model batch from the loader's, e.g. windows sampled from series), so samples/s cannot be compared; no winner is picked on these numbers`
    );
  if (Math.abs(actual - 1) <= SAMPLES_TOLERANCE)
    return (
      `samples per step did not follow the effective batch: ${what(base.knobs, base.result)} → ${what(other.knobs, other.result)} (×${expected.toFixed(2)}) but the job ran ${s0} → ${s} samples per step, the same batch: ` +
      `the ${MICRO_BATCH_KNOB} knob looks inert (the job reads it and trains on another value: overwritten, or derived from other settings), or the job counts something else than its batch as samples; no winner is picked on these numbers`
    );
  return (
    `samples per step did not follow the effective batch (micro-batch × accumulation): ${what(base.knobs, base.result)} → ${what(other.knobs, other.result)} (×${expected.toFixed(2)}) but the job reported ${s0} → ${s} samples per step (×${actual.toFixed(2)}); ` +
    "the job counts something else as samples (e.g. a sequence-first batch counting time steps), so samples/s cannot be compared: no winner is picked on these numbers"
  );
}

/** How {@link samplesMismatch}'s finding begins when the model's batch followed the knob and the loader's did not. */
export const MODEL_WORK_ONLY = "the model's batch followed the knob, the loader's did not";

/** How {@link modelWorkUnmoved}'s finding begins (tune.json's no-winner reason tells it by this). */
export const MODEL_WORK_UNMOVED = "the model was fed the same samples per step";

/**
 * The loader's samples per step followed the effective batch, but the model's input did not move
 * (the attach's `model_samples`, read beside the loader's count): the knob changes what the
 * DataLoader yields, not what the model trains on each step (a library that draws its model batch
 * from the loader's, windows sampled from series). Samples/s then grows with the knob while the
 * model's work per step stays the same, so it cannot be compared. The one-line finding, or null when
 * the model's count moved too, a trial lacks it, or the loader's count did not move.
 *
 * @example
 * ```ts
 * modelWorkUnmoved(
 *   { knobs: { batch_size: 32 }, result: { samplesPerStep: 32, modelSamplesPerStep: 256, ... } },
 *   { knobs: { batch_size: 64 }, result: { samplesPerStep: 64, modelSamplesPerStep: 256, ... } },
 * ); // "the model was fed the same samples per step: ..."
 * ```
 */
export function modelWorkUnmoved(base: { knobs: Knobs; result: TrialResult }, other: { knobs: Knobs; result: TrialResult }): string | null {
  const s0 = base.result.samplesPerStep;
  const s = other.result.samplesPerStep;
  const m0 = base.result.modelSamplesPerStep;
  const m = other.result.modelSamplesPerStep;
  if (s0 == null || s == null || m0 == null || m == null || s0 <= 0 || m0 <= 0) return null;
  const loader = s / s0;
  if (Math.abs(loader - 1) <= SAMPLES_TOLERANCE || Math.abs(m / m0 - 1) > SAMPLES_TOLERANCE) return null;
  const what = (knobs: Knobs, result: TrialResult): string => `${String(knobs[MICRO_BATCH_KNOB] ?? "?")} × ${accumulationOf(knobs, result)}`;
  return (
    `${MODEL_WORK_UNMOVED}: ${what(base.knobs, base.result)} → ${what(other.knobs, other.result)} moved the DataLoader's samples per step ${s0} → ${s} (×${loader.toFixed(2)}) ` +
    `but the batch dimension of the model's input stayed ${m0} → ${m}: the knob changes what the loader yields, not what the model trains on each step ` +
    "(a library that draws its model batch from the loader's, e.g. windows sampled from series), so samples/s cannot be compared; no winner is picked on these numbers"
  );
}

/**
 * A trial whose samples per step grew with the effective batch, but less than asked: the job ran
 * out of data for one step (a batch larger than its data set, where no loader told brim the size).
 * The cause, or null when the samples followed, did not grow, or cannot be compared.
 *
 * @example
 * ```ts
 * dataShort({ knobs: { batch_size: 128 }, result: { samplesPerStep: 128, ... } }, { knobs: { batch_size: 8192 }, result: { samplesPerStep: 6000, ... } });
 * // "batch larger than the data: micro-batch 8192 × 1 asked for 8192 samples per step, the job ran 6000 (all the data it has, it seems)"
 * ```
 */
export function dataShort(base: { knobs: Knobs; result: TrialResult }, other: { knobs: Knobs; result: TrialResult }): string | null {
  const e0 = effectiveBatchOf(base.knobs, base.result);
  const e = effectiveBatchOf(other.knobs, other.result);
  // even its largest step short of the batch asked for: no step ran it
  const s0 = base.result.samplesPerStep;
  const s = other.result.samplesPerStepMax ?? other.result.samplesPerStep;
  if (typeof base.knobs[MICRO_BATCH_KNOB] !== "number" || e0 === null || e === null || e <= e0 || s0 == null || s == null || s0 <= 0) return null;
  const actual = s / s0;
  if (actual <= 1 + SAMPLES_TOLERANCE || actual >= (e / e0) * (1 - SAMPLES_TOLERANCE)) return null;
  const asked = Math.round((e / e0) * s0);
  return `batch larger than the data: micro-batch ${String(other.knobs[MICRO_BATCH_KNOB])} × ${accumulationOf(other.knobs, other.result)} asked for ${asked} samples per step, the job ran ${s} (all the data it has, it seems)`;
}

/**
 * What a trial's samples per step say against trial 0's: `short`, a batch larger than the data (the
 * trial fails with that cause, and bounds the micro-batch); else `mismatch`, samples that do not
 * follow the effective batch, or a model's input that does not follow them ({@link judgeTrial} says what follows). A trial stopped early as slower measured steps too:
 * a batch larger than a JAX loop's data is both slow and short, and must read as short.
 *
 * @example
 * ```ts
 * judgeSamples(trial0, { knobs: { batch_size: 8192 }, result: { end: "slower", samplesPerStep: 6000, ... } }).short; // "batch larger than the data: ..."
 * ```
 */
export function judgeSamples(
  base: { knobs: Knobs; result: TrialResult },
  other: { knobs: Knobs; result: TrialResult },
): { short: string | null; mismatch: string | null } {
  const stepped = other.result.end === "ok" || other.result.end === "slower";
  const short = stepped ? dataShort(base, other) : null;
  return { short, mismatch: short === null ? (samplesMismatch(base, other) ?? modelWorkUnmoved(base, other)) : null };
}

/**
 * {@link judgeSamples} and what follows for the trial: a batch larger than the data fails it (it
 * bounds the micro-batch); a mismatch on a trial whose micro-batch or accumulation differs from the
 * baseline's marks it `notComparable` (the finding is about that knob: the search keeps the
 * baseline's micro-batch and tunes the rest); a mismatch at the baseline's own batch is `untrusted`:
 * something else broke the count, and no trial can be compared.
 *
 * @example
 * ```ts
 * judgeTrial(trial0, { knobs: { batch_size: 512 }, result: { samplesPerStep: 64, ... } }).result.notComparable; // "samples per step did not follow ..."
 * ```
 */
export function judgeTrial(
  base: { knobs: Knobs; result: TrialResult },
  other: { knobs: Knobs; result: TrialResult },
): { result: TrialResult; untrusted: string | null } {
  const { short, mismatch } = judgeSamples(base, other);
  if (short !== null) return { result: { ...other.result, end: "crashed", samplesPerSecond: null, failure: { kind: "data", cause: short } }, untrusted: null };
  if (mismatch === null) return { result: other.result, untrusted: null };
  const moved = [MICRO_BATCH_KNOB, ACCUMULATION_KNOB].some((knob) => other.knobs[knob] !== base.knobs[knob]);
  return moved ? { result: { ...other.result, notComparable: mismatch }, untrusted: null } : { result: other.result, untrusted: mismatch };
}

/** The effective-batch policy line of a tune (as tune.json keeps it). */
export interface PolicyLine {
  kind: string;
  before: number | null;
  after: number | null;
  text: string;
}

/**
 * The policy line once the winner is known: the effective batch that really runs with it (its
 * reported accumulation, else its knob, else 1) and what that means for the user.
 *
 * @example
 * ```ts
 * winnerPolicy({ kind: "free", before: 64, after: null, text: "" }, { batch_size: 256 }, { accumulation: 1 }).text;
 * // "effective batch free: the winner changes it from 64 to 256 (256 × 1, ×4.00); check the learning rate suits it, or tune again with --fix batch_size to keep it"
 * ```
 */
export function winnerPolicy(policy: PolicyLine, winner: Knobs, seen: SeenBatch | null | undefined): Pick<PolicyLine, "after" | "text"> {
  const micro = winner[MICRO_BATCH_KNOB];
  const acc = accumulationOf(winner, seen);
  const after = effectiveBatchOf(winner, seen) ?? policy.before;
  let text = policy.text;
  if (policy.kind === "free" && policy.before !== null && after !== null && after !== policy.before) {
    const hold =
      winner[ACCUMULATION_KNOB] !== undefined
        ? `or tune again with --effective-batch ${policy.before} to hold it`
        : acc > 1
          ? `the job accumulates ${acc} batches per step in its code, where brim cannot change it (--fix batch_size keeps the micro-batch)`
          : "or tune again with --fix batch_size to keep it";
    text = `effective batch free: the winner changes it from ${policy.before} to ${after} (${String(micro)} × ${acc}, ×${(after / policy.before).toFixed(2)}); check the learning rate suits it, ${hold}`;
  } else if (policy.kind === "held") {
    text = `effective batch held at ${policy.before ?? "?"}: the winner keeps it (${String(micro)} × ${String(acc)})`;
  } else if (policy.before !== null) {
    text = `effective batch: the winner keeps it at ${policy.before}`;
  }
  return { after, text };
}
