/**
 * The loss parity of a confirmation, read from the store: the first interleaved pair whose two runs
 * (your configuration's, the winner's) ran, their recorded timelines loaded and compared step by step
 * (parity.ts). Part of the confirmation: no extra trial runs for it.
 *
 * @example
 * ```ts
 * record.parity = (await confirmationParity(store, record)) ?? undefined;
 * ```
 * @module
 */
import { knobSpec } from "../knobs/index.ts";
import { loadRun } from "../record/load.ts";
import type { RunStore } from "../record/store.ts";
import { mainSteps } from "../record/timeline/index.ts";
import type { TuneRecord, TuneTrialRecord } from "../record/types.ts";
import { confirmRole } from "./confirm.ts";
import { modelFactsOf, parityRecord, stepLosses, type ParityRecord, type ParitySide } from "./parity.ts";

/** The first confirmation pair whose two trials both ran with a run in the store: your configuration (A), then the winner (B). */
function confirmPair(trials: readonly TuneTrialRecord[]): { a: TuneTrialRecord; b: TuneTrialRecord } | null {
  const ran = [...trials].filter((t) => t.end === "ok" && t.run_id !== null).sort((x, y) => x.index - y.index);
  const a = ran.find((t) => confirmRole(t.purpose) === "A");
  const b = ran.find((t) => confirmRole(t.purpose) === "B");
  return a !== undefined && b !== undefined ? { a, b } : null;
}

async function sideOf(store: RunStore, trial: TuneTrialRecord): Promise<ParitySide> {
  const run = await loadRun(store, trial.run_id as string);
  const { losses, precision, microBatch, accumulationSeen } = stepLosses(mainSteps(run.timeline));
  const knobMicro = trial.knobs["batch_size"];
  const knobPrecision = trial.knobs["precision"];
  const own = typeof knobPrecision === "string" ? knobPrecision : (precision ?? "fp32");
  // fp32's matmuls on TF32 (matmul_precision): the tolerance of what they compute in
  const matmul = Object.entries(trial.knobs).flatMap(([knob, value]) => knobSpec(knob)?.computesIn?.(value) ?? []);
  return {
    trial: trial.index,
    knobs: trial.knobs,
    losses,
    precision: own === "fp32" ? (matmul[0] ?? own) : own,
    effectiveBatch: trial.effective_batch ?? null,
    microBatch: typeof knobMicro === "number" ? knobMicro : microBatch,
    facts: modelFactsOf(run.timeline.events),
    accumulationSeen,
  };
}

/**
 * The parity of the confirmation's first pair that ran both sides, or null when none did (no
 * confirmation, or its trials failed). A run the store no longer has is said, not thrown.
 *
 * @example
 * ```ts
 * const parity = await confirmationParity(store, record);
 * parity?.line; // "same model: the first 20 steps' losses match your configuration's within 1e-4 (largest difference 2e-7)"
 * ```
 */
export async function confirmationParity(store: RunStore, record: Pick<TuneRecord, "trials">): Promise<ParityRecord | null> {
  const pair = confirmPair(record.trials);
  if (pair === null) return null;
  try {
    return parityRecord(await sideOf(store, pair.a), await sideOf(store, pair.b));
  } catch (error) {
    // the tune's verdict stands without it: a parity that cannot be read is said, never the tune's failure
    const reason = `the confirmation's runs could not be read: ${error instanceof Error ? error.message : String(error)}`;
    const batch = { before: pair.a.effective_batch ?? null, after: pair.b.effective_batch ?? null };
    return {
      verdict: "not_comparable",
      reason,
      line: `losses not compared step by step: ${reason}`,
      effective_batch: { ...batch, held: batch.before !== null && batch.before === batch.after },
      baseline_trial: pair.a.index,
      winner_trial: pair.b.index,
      precisions: { baseline: "fp32", winner: "fp32" },
      baseline_losses: [],
      winner_losses: [],
      evidence: [],
    };
  }
}
