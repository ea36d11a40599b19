/**
 * Plan accuracy against measured peaks: turns the GPU campaign's plan-accuracy records into pairs
 * (the current model's prediction vs the measured process-tree peak), fits the GPU- and
 * framework-dependent constants to them (src/plan/fit-constants.ts), and scores the plan in-sample
 * and leave-one-job-out.
 * Pure: the caller reads the files and hands over a loader for the model specs the records name.
 * @module
 */
import { DEFAULT_CONSTANTS, type PlanConstants } from "./constants.ts";
import { footprintFromGraph, type ModelFootprint } from "./footprint.ts";
import { graphFromSpec } from "./families.ts";
import { reanchor } from "./anchor.ts";
import { memoryAt } from "./memory.ts";
import type { ModelInput } from "./model-file.ts";
import { footprintFromProfile } from "./profile.ts";
import { OPTIMIZERS, PRECISIONS } from "./spec.ts";
import { median } from "../stats.ts";
import { featuresOf, fitConstants, type AccuracyPair } from "./fit-constants.ts";

export { fitConstants, UNDER_WEIGHT, type AccuracyPair, type FittedConstants } from "./fit-constants.ts";

/**
 * Where a prediction's activations come from: the bundled spec, the SDK profile the campaign
 * recorded, or the profile `brim plan -- <command>` measured from the job's fp32 run on a CPU (every
 * precision planned from it, as that path plans a host with no GPU).
 */
export type PredictionSource = "spec" | "profile" | "script";

/** The fields of a campaign plan-accuracy record (bench/gpu, schema brim.gpu-campaign/v1) this module reads. */
export interface AccuracyRecord {
  part?: string;
  key?: string;
  ok?: boolean;
  quick?: boolean;
  job?: string;
  model_spec?: string;
  precision?: string;
  precision_in_force?: string;
  micro_batch?: number;
  optimizer?: string;
  profile?: unknown;
  machine?: { gpus?: { name?: string }[] };
  measured?: { peak_tree_gpu_bytes?: number; framework_peak_reserved_bytes?: number; framework_peak_allocated_bytes?: number; oom_recoveries?: number };
}

/** Accuracy of a set of predictions: |error| relative to the measured peak. */
export interface Accuracy {
  pairs: number;
  median_abs_error: number | null;
  worst_abs_error: number | null;
  /** share of pairs predicted more than 3 % below the measured peak (the ones that would OOM) */
  under_3pct_share: number | null;
}

/** How a line of plan-validation.json was scored. */
export type ValidationMode = "in-sample" | "leave-one-job-out" | "leave-one-job-out, jobs with no term of their own";

/** One line of plan-validation.json. */
export interface ValidationResult extends Accuracy {
  source: PredictionSource;
  mode: ValidationMode;
}

/** A cuDNN workspace the memory model scales by a fitted factor. */
export type WorkspaceKind = "conv" | "rnn";

/** What each workspace factor stands for, as plans and records name it. */
export const WORKSPACE_TERMS: Readonly<Record<WorkspaceKind, string>> = {
  conv: "the convolutions' cuDNN workspace",
  rnn: "the recurrent layers' cuDNN workspace",
};

/**
 * A job whose pairs need a term no other job's pairs show: held out, its factor is fitted from
 * nothing and keeps its default, so its leave-one-job-out errors measure that term, not the plan.
 */
export interface KeptOut {
  source: PredictionSource;
  job: string;
  terms: string[];
  pairs: number;
  median_error: number | null;
  worst_error: number | null;
  under_3pct_share: number | null;
}

/**
 * Accuracy of relative errors (predicted − measured) / measured.
 *
 * @example
 * ```ts
 * accuracy([0.01, -0.05, 0.02]); // { pairs: 3, median_abs_error: 0.02, worst_abs_error: 0.05, under_3pct_share: 0.333… }
 * ```
 */
export function accuracy(errors: readonly number[]): Accuracy {
  if (errors.length === 0) return { pairs: 0, median_abs_error: null, worst_abs_error: null, under_3pct_share: null };
  const abs = errors.map(Math.abs).sort((a, b) => a - b);
  return {
    pairs: errors.length,
    median_abs_error: median(abs),
    worst_abs_error: abs[abs.length - 1] ?? 0,
    under_3pct_share: errors.filter((e) => e < -0.03).length / errors.length,
  };
}

/**
 * The usable pairs of a set of records for one source, the latest record per GPU and key, and a
 * count of the records left out by reason.
 *
 * @example
 * ```ts
 * const { pairs } = pairsFromRecords(records, "spec", (path) => parseModelFile(readFileSync(path, "utf8"), path));
 * const script = pairsFromRecords(records, "script", load, { scriptProfiles: { nbeats: profileOfItsFp32Run } });
 * ```
 */
export function pairsFromRecords(
  records: readonly AccuracyRecord[],
  source: PredictionSource,
  loadModel: (path: string) => ModelInput,
  options: { includeQuick?: boolean; scriptProfiles?: Readonly<Record<string, unknown>> } = {},
): { pairs: AccuracyPair[]; skipped: Record<string, number> } {
  const latest = new Map<string, AccuracyRecord>();
  for (const r of records) if (r.part === "plan-accuracy") latest.set(`${r.machine?.gpus?.[0]?.name ?? "cpu"}|${r.key ?? ""}`, r);
  const pairs: AccuracyPair[] = [];
  const skipped: Record<string, number> = {};
  const skip = (why: string): void => {
    skipped[why] = (skipped[why] ?? 0) + 1;
  };
  const models = new Map<string, ModelInput>();
  for (const r of latest.values()) {
    const m = r.measured ?? {};
    const precision = PRECISIONS.find((p) => p === r.precision);
    const optimizer = OPTIMIZERS.find((o) => o === r.optimizer);
    if (r.ok !== true) skip("failed run");
    else if (r.quick === true && options.includeQuick !== true) skip("quick (CPU smoke) record");
    else if (precision === undefined || optimizer === undefined || r.micro_batch === undefined || r.job === undefined) skip("incomplete record");
    else if (r.precision_in_force !== undefined && r.precision_in_force !== r.precision) skip("precision fell back");
    else if ((m.oom_recoveries ?? 0) > 0) skip("out-of-memory recovery split the micro-batch");
    else if (typeof m.peak_tree_gpu_bytes !== "number" || m.peak_tree_gpu_bytes <= 0) skip("no measured tree peak");
    else {
      let footprint: ModelFootprint | undefined;
      if (source === "spec") {
        if (r.model_spec === undefined) {
          skip("no model spec");
          continue;
        }
        let model = models.get(r.model_spec);
        if (model === undefined) {
          model = loadModel(r.model_spec);
          models.set(r.model_spec, model);
        }
        if (model.kind !== "spec") {
          skip("model file is not a spec");
          continue;
        }
        footprint = footprintFromGraph(graphFromSpec(model.spec), "spec");
      } else if (source === "script") {
        const profile = options.scriptProfiles?.[r.job];
        if (profile === undefined) {
          skip("no script plan for this job");
          continue;
        }
        footprint = footprintFromProfile(profile);
      } else {
        const saved = (r.profile as { per_sample?: { saved_bytes?: Record<string, unknown> } } | undefined)?.per_sample?.saved_bytes;
        // brim plans a precision the profile lacks from another one's numbers: not a test of the profile
        if (saved?.[precision] === undefined) {
          skip(r.profile === undefined || r.profile === null ? "no profile (the SDK could not profile this job)" : "profile did not measure this precision");
          continue;
        }
        footprint = footprintFromProfile(r.profile);
      }
      const reserved = m.framework_peak_reserved_bytes;
      pairs.push({
        key: r.key ?? `${r.job}|${precision}|${r.micro_batch}`,
        job: r.job,
        precision,
        micro_batch: r.micro_batch,
        measured: m.peak_tree_gpu_bytes,
        outside_allocator: typeof reserved === "number" && reserved > 0 ? m.peak_tree_gpu_bytes - reserved : undefined,
        allocated: typeof m.framework_peak_allocated_bytes === "number" && m.framework_peak_allocated_bytes > 0 ? m.framework_peak_allocated_bytes : undefined,
        reserved: typeof reserved === "number" && reserved > 0 ? reserved : undefined,
        footprint,
        setup: { precision, optimizer, checkpointing: false, gpus: 1, sharding: "none" },
      });
    }
  }
  pairs.sort((a, b) => a.key.localeCompare(b.key));
  return { pairs, skipped };
}

/**
 * The plan's predicted peak for a pair under a set of constants: the planner's own memory model.
 *
 * @example
 * ```ts
 * predict(pair, CALIBRATIONS[0].constants);
 * ```
 */
export function predict(pair: AccuracyPair, constants: Partial<PlanConstants>): number {
  return memoryAt(pair.footprint, pair.setup, pair.micro_batch, { ...DEFAULT_CONSTANTS, ...constants }).peak_bytes;
}

/** Relative errors of the predictions for the pairs. */
export function errorsOf(pairs: readonly AccuracyPair[], constants: Partial<PlanConstants>): number[] {
  return pairs.map((p) => (predict(p, constants) - p.measured) / p.measured);
}

/**
 * In-sample accuracy (constants fitted to all pairs) and leave-one-job-out accuracy (for each job,
 * constants fitted to the other jobs' pairs predict that job's pairs).
 *
 * @example
 * ```ts
 * const [inSample, heldOut] = validate(pairs, "spec");
 * heldOut.median_abs_error; // e.g. 0.04
 * ```
 */
export function validate(pairs: readonly AccuracyPair[], source: PredictionSource): ValidationResult[] {
  const all = fitConstants(pairs);
  const inSample = all === null ? accuracy([]) : accuracy(errorsOf(pairs, all));
  const byJob = leaveOneJobOutByJob(pairs);
  const own = ownTerms(pairs);
  const shared = [...byJob].filter(([job]) => (own.get(job) ?? []).length === 0).flatMap(([, errors]) => errors);
  return [
    { source, mode: "in-sample", ...inSample },
    { source, mode: "leave-one-job-out", ...accuracy([...byJob.values()].flat()) },
    { source, mode: "leave-one-job-out, jobs with no term of their own", ...accuracy(shared) },
  ];
}

/** Each job's errors under constants fitted to the other jobs. */
export function leaveOneJobOutErrors(pairs: readonly AccuracyPair[]): number[] {
  return [...leaveOneJobOutByJob(pairs).values()].flat();
}

function leaveOneJobOutByJob(pairs: readonly AccuracyPair[]): Map<string, number[]> {
  const jobs = [...new Set(pairs.map((p) => p.job))];
  const out = new Map<string, number[]>();
  if (jobs.length < 2) return out;
  for (const job of jobs) {
    const fit = fitConstants(pairs.filter((p) => p.job !== job));
    if (fit !== null)
      out.set(
        job,
        errorsOf(
          pairs.filter((p) => p.job === job),
          fit,
        ),
      );
  }
  return out;
}

/**
 * Per job, the workspace kinds its pairs have and no other job's pairs do (most jobs: none).
 *
 * @example
 * ```ts
 * ownTerms(pairs).get("cnn-lstm"); // ["conv"]: the only job with a convolution
 * ```
 */
export function ownTerms(pairs: readonly AccuracyPair[]): Map<string, WorkspaceKind[]> {
  const kinds = new Map<string, Set<WorkspaceKind>>();
  for (const p of pairs) {
    const f = featuresOf(p);
    const set = kinds.get(p.job) ?? new Set<WorkspaceKind>();
    for (const k of ["conv", "rnn"] as const) if (f[k] > 0) set.add(k);
    kinds.set(p.job, set);
  }
  const out = new Map<string, WorkspaceKind[]>();
  for (const [job, set] of kinds)
    out.set(
      job,
      [...set].filter((k) => ![...kinds].some(([other, theirs]) => other !== job && theirs.has(k))),
    );
  return out;
}

/**
 * The jobs whose leave-one-job-out errors a term of their own decides ({@link KeptOut}), with those errors.
 *
 * @example
 * ```ts
 * keptOut(pairs, "script"); // [{ job: "cnn-lstm", terms: ["the convolutions' cuDNN workspace"], pairs: 12, worst_error: -0.308, … }]
 * ```
 */
export function keptOut(pairs: readonly AccuracyPair[], source: PredictionSource): KeptOut[] {
  const byJob = leaveOneJobOutByJob(pairs);
  return [...ownTerms(pairs)].flatMap(([job, kinds]) => {
    const errors = byJob.get(job) ?? [];
    if (kinds.length === 0 || errors.length === 0) return [];
    const a = accuracy(errors);
    const signed = [...errors].sort((x, y) => x - y);
    return [
      {
        source,
        job,
        terms: kinds.map((k) => WORKSPACE_TERMS[k]),
        pairs: a.pairs,
        median_error: median(signed),
        worst_error: signed.reduce((w, e) => (Math.abs(e) > Math.abs(w) ? e : w), 0),
        under_3pct_share: a.under_3pct_share,
      },
    ];
  });
}

/**
 * Accuracy after one calibrating trial, leave-one-job-out: constants fitted to the other jobs,
 * each job and precision re-anchored ({@link reanchor}) on its measurement at the largest
 * micro-batch but one, and
 * the other micro-batches of that job and precision predicted.
 */
export function oneTrialErrors(pairs: readonly AccuracyPair[]): number[] {
  return oneTrialPredictions(pairs).map((x) => (x.predicted - x.pair.measured) / x.pair.measured);
}

/** The predictions behind {@link oneTrialErrors}, each with the pair it re-anchored on. */
export function oneTrialPredictions(pairs: readonly AccuracyPair[]): { pair: AccuracyPair; anchor: AccuracyPair; predicted: number }[] {
  const jobs = [...new Set(pairs.map((p) => p.job))];
  const out: { pair: AccuracyPair; anchor: AccuracyPair; predicted: number }[] = [];
  for (const job of jobs) {
    const fit = fitConstants(pairs.filter((p) => p.job !== job));
    if (fit === null) continue;
    const k: PlanConstants = { ...DEFAULT_CONSTANTS, ...fit };
    const mine = pairs.filter((p) => p.job === job);
    for (const precision of new Set(mine.map((p) => p.precision))) {
      const group = mine.filter((p) => p.precision === precision).sort((a, b) => a.micro_batch - b.micro_batch);
      if (group.length < 2) continue;
      const anchor = group[group.length - 2]!;
      const { peakAt } = reanchor(anchor.footprint, anchor.setup, k, {
        micro_batch: anchor.micro_batch,
        peak_bytes: anchor.measured,
        allocated_bytes: anchor.allocated,
        reserved_bytes: anchor.reserved,
      });
      for (const p of group) if (p !== anchor) out.push({ pair: p, anchor, predicted: peakAt(p.micro_batch) });
    }
  }
  return out;
}
