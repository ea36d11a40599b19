/**
 * tune.json as the tuner writes it: one record per trial, the bindings with the SHA-256 of each file
 * as read, and the end of the tune (winner, effective batch, no-winner reason and what to try next).
 *
 * @example
 * ```ts
 * await recordTrial(record, store, 3, knobs, "memory probe", result, runId);
 * ```
 * @module
 */
import type { ConfigDocument } from "../configs/index.ts";
import type { RunStore } from "../record/store.ts";
import type { KnobBindingRecord, TuneRecord, TuneTrialRecord } from "../record/types.ts";
import { effectiveBatchOf, MODEL_WORK_ONLY, MODEL_WORK_UNMOVED } from "./effective.ts";
import type { KnobBinding } from "../knobs/index.ts";
import type { Knobs, MemoryLineReport, TrialResult } from "./types.ts";
import { ENDED_TOO_SOON, NO_TRAINING_STEP } from "./types.ts";

/**
 * A binding as tune.json keeps it.
 *
 * @example
 * ```ts
 * bindingRecord({ knob: "batch_size", via: "config", file: "/p/c.yaml", key: "data.batch_size" }, documents).file_sha256;
 * ```
 */
export function bindingRecord(binding: KnobBinding, documents: ReadonlyMap<string, ConfigDocument>): KnobBindingRecord {
  if (binding.via === "argv") return { knob: binding.knob, via: "argv", index: binding.index, form: binding.form, flag: binding.flag, value: binding.value };
  if (binding.via === "code")
    return {
      knob: binding.knob,
      via: "code",
      file: binding.file,
      line: binding.line,
      name: binding.name,
      value: binding.value,
      ...(binding.argument === true ? { argument: true } : {}),
    };
  if (binding.via !== "config") return { knob: binding.knob, via: binding.via };
  return {
    knob: binding.knob,
    via: "config",
    file: binding.file,
    key: binding.key,
    file_sha256: documents.get(binding.file)?.sha256 ?? "",
    ...(binding.globalBatch === undefined ? {} : { global_batch_ranks: binding.globalBatch.ranks }),
  };
}

/**
 * A trial as tune.json keeps it.
 *
 * @example
 * ```ts
 * trialRecord(0, { batch_size: 32 }, "baseline", result, "20261122-…").samples_per_s;
 * ```
 */
export function trialRecord(index: number, knobs: Knobs, purpose: string, result: TrialResult, runId: string | null): TuneTrialRecord {
  return {
    index,
    run_id: runId,
    knobs,
    purpose,
    end: result.end,
    samples_per_s: result.samplesPerSecond,
    ...(result.rateIsBound === true ? { samples_per_s_bound: true } : {}),
    ...(result.rateUnit !== undefined ? { rate_unit: result.rateUnit } : {}),
    ...(result.rateFrom !== undefined ? { rate_from: result.rateFrom } : {}),
    peak_bytes: result.peakBytes,
    framework_peak_bytes: result.frameworkPeakBytes,
    gpu_util_mean: result.gpuUtilMean ?? null,
    data_wait_share: result.dataWaitShare ?? null,
    duration_s: result.durationS,
    oom_recoveries: result.oomRecoveries,
    failure: result.failure ?? null,
    ...(result.tail !== undefined && result.tail.length > 0 ? { tail: result.tail } : {}),
    fixed_cost_s: result.fixedCostS ?? null,
    measured_s: result.measuredS ?? null,
    stopped_by: result.stoppedBy ?? null,
    samples_per_step: result.samplesPerStep ?? null,
    ...(result.modelSamplesPerStep != null ? { model_samples_per_step: result.modelSamplesPerStep } : {}),
    ...(result.notComparable !== undefined ? { not_comparable: result.notComparable } : {}),
    sm_activity_mean: result.smActivityMean ?? null,
    accumulation: result.accumulation ?? null,
    effective_batch: result.end === "ok" || result.end === "slower" ? effectiveBatchOf(knobs, result) : null,
    ...(result.evaluation != null ? { evaluation: result.evaluation } : {}),
  };
}

/**
 * The search's memory line as tune.json keeps it (null when it drew none).
 *
 * @example
 * ```ts
 * memoryLineRecord(outcome.memoryLine)?.predicted_max_micro_batch; // 96
 * ```
 */
export function memoryLineRecord(line: MemoryLineReport | null): TuneRecord["memory_line"] {
  if (line === null) return null;
  return {
    intercept_bytes: line.interceptBytes,
    bytes_per_sample: line.bytesPerSample,
    margin_bytes: line.marginBytes,
    predicted_max_micro_batch: line.predictedMaxMicroBatch,
  };
}

/**
 * Adds (or replaces) trial `index` in the record and writes it.
 *
 * @example
 * ```ts
 * await recordTrial(record, store, 0, baseline, "baseline", result, runId);
 * ```
 */
export async function recordTrial(
  record: TuneRecord,
  store: RunStore,
  index: number,
  knobs: Knobs,
  purpose: string,
  result: TrialResult,
  runId: string | null,
): Promise<void> {
  record.trials = [...record.trials.filter((trial) => trial.index !== index), trialRecord(index, knobs, purpose, result, runId)];
  await store.writeTune(record);
}

/**
 * Why a tune has no winner and what to try next, from how its trials ended.
 *
 * @example
 * ```ts
 * noWinnerAdvice(record.trials, "converged"); // { reason: "every trial crashed: ValueError: ...", next: "fix the job so that it runs as configured, then tune again" }
 * ```
 */
export function noWinnerAdvice(
  trials: readonly TuneTrialRecord[],
  stopReason: string | null,
  capText: string,
  untrusted: string | null = null,
): { reason: string; next: string } {
  const baseline = trials.find((trial) => trial.index === 0);
  if (stopReason === "untrusted" && untrusted?.startsWith(MODEL_WORK_UNMOVED) === true) {
    return {
      reason:
        "the batch-size knob changes what the DataLoader yields, not what the model is fed each step (the batch dimension of its input stayed the same), so samples/s cannot be compared between trials",
      next: "tune the setting that sizes the model's batch (its own knob, e.g. --bind batch_size=<config>:<its key>), or report the samples the model trains on per step yourself (brim.log(samples=...))",
    };
  }
  if (stopReason === "untrusted" && untrusted?.startsWith(MODEL_WORK_ONLY) === true) {
    return {
      reason:
        "the batch-size knob sizes what the model is fed each step, not the DataLoader's batch brim counts (the batch dimension of the model's input followed it, the loader's did not), so samples/s cannot be compared between trials",
      next: "report the samples the model trains on per step yourself (brim.log(samples=...)), or tune the loader's batch setting instead",
    };
  }
  if (stopReason === "untrusted") {
    return {
      reason: "the samples the job reports per step do not follow the micro-batch, so samples/s cannot be compared between trials",
      next: "report the samples of a step yourself (brim.track(loader, samples=lambda batch: batch[0].shape[BATCH_DIM])), or tune with --fix batch_size",
    };
  }
  if (stopReason === "nothing_to_tune")
    return {
      reason:
        "nothing to tune: no knob brim can vary was found (no batch size, workers, accumulation or precision on the command line, in a config file it names, or read through brim.knob)",
      next: "name the knob: a flag (python train.py --batch-size 32), a config key (--bind batch_size=conf.yaml:data.batch_size), a {batch_size} template with --knob batch_size=32, or brim.knob('batch_size', 32) in the job",
    };
  if (baseline === undefined) return { reason: "no trial ran", next: "check the command runs on its own, then tune again" };
  const kind = baseline.failure?.kind;
  if (kind === "crash")
    return {
      reason: `your configuration (trial 0) crashed: ${baseline.failure?.cause ?? "see its output"}`,
      next: "fix the job so that it runs as configured, then tune again",
    };
  if (kind === "data")
    return {
      reason: `your configuration (trial 0) ran no step: ${baseline.failure?.cause ?? "its batch is larger than the data"}`,
      next: "lower the batch size below the samples the loader sees (per rank under DDP), then tune again",
    };
  if (kind === "time_limit")
    return { reason: "trial 0 made no two steady steps within the trial time", next: "raise --trial-time (e.g. --trial-time 10m), or lower the work per step" };
  if (kind === "no_steps" && baseline.failure?.cause.startsWith(ENDED_TOO_SOON) === true)
    return { reason: `your configuration (trial 0): ${baseline.failure.cause}`, next: "make the job run more steps, then tune again" };
  if (kind === "no_steps" && baseline.failure?.cause.startsWith(NO_TRAINING_STEP) === true)
    return {
      reason: `your configuration (trial 0): ${baseline.failure.cause}`,
      next: "make the job train (an optimizer step) within a trial, then tune again",
    };
  if (kind === "no_steps")
    return {
      reason: "no trial reported steps with samples",
      next: "instrument the loop (brim.track(loader)) or make the job print its progress, then tune again",
    };
  const memory = trials.filter((trial) => trial.failure?.kind === "memory" || trial.failure?.kind === "cap" || trial.oom_recoveries > 0);
  if (memory.length > 0 && memory.length === trials.filter((trial) => trial.end !== "interrupted").length) {
    return {
      reason: `nothing ran under the cap ${capText}`,
      next: "raise --cap, or lower the memory per sample (a lower precision, gradient checkpointing), or allow a smaller micro-batch (--knob batch_size=1,2,4)",
    };
  }
  if (stopReason === "max_time" || stopReason === "max_trials")
    return {
      reason: `the budget ran out (${stopReason === "max_time" ? "--max-time" : "--max-trials"}) before a configuration was measured`,
      next: "raise --max-time / --max-trials",
    };
  return {
    reason: "no trial finished under the cap with a measured throughput",
    next: "look at each trial's end and cause in the table above, fix what they name, and tune again",
  };
}
