/**
 * Plan accuracy against measured peaks: turns the GPU campaign's plan-accuracy records into pairs
 * (the current model's prediction vs the measured process-tree peak), fits the GPU- and
 * framework-dependent constants to them, and scores the plan in-sample and leave-one-job-out.
 * Pure: the caller reads the files and hands over a loader for the model specs the records name.
 * @module
 */
import { DEFAULT_CONSTANTS, type PlanConstants } from "./constants.ts";
import { footprintFromGraph, type ModelFootprint } from "./footprint.ts";
import { graphFromSpec } from "./families.ts";
import { reanchor } from "./anchor.ts";
import { memoryAt, type TrainingSetup } from "./memory.ts";
import type { ModelInput } from "./model-file.ts";
import { footprintFromProfile } from "./profile.ts";
import { OPTIMIZERS, PRECISIONS, type Precision } from "./spec.ts";
import { median } from "../stats.ts";

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

/** One measured peak and what the current model needs to predict it. */
export interface AccuracyPair {
  key: string;
  job: string;
  precision: Precision;
  micro_batch: number;
  /** the process tree's peak GPU memory (NVML) */
  measured: number;
  /** the tree peak minus PyTorch's peak reserved: memory outside the caching allocator */
  outside_allocator: number | undefined;
  /** PyTorch's peak allocated bytes, where the job reported them */
  allocated: number | undefined;
  /** PyTorch's peak reserved bytes, where the job reported them */
  reserved: number | undefined;
  footprint: ModelFootprint;
  setup: TrainingSetup;
}

/** The constants a fit sets; the rest keep their defaults. */
export type FittedConstants = Pick<
  PlanConstants,
  "cuda_context_bytes" | "cublas_workspace_bytes" | "cudnn_workspace_bytes" | "allocator_slack_fraction" | "conv_workspace_factor" | "rnn_workspace_factor"
>;

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

const ZERO: Partial<PlanConstants> = {
  cuda_context_bytes: 0,
  cublas_workspace_bytes: 0,
  cudnn_workspace_bytes: 0,
  allocator_slack_fraction: 0,
  conv_workspace_factor: 0,
  rnn_workspace_factor: 0,
};

/** The pair split into the parts the constants multiply, read off the memory model itself. */
interface Features {
  static: number;
  dynamic: number;
  conv: number;
  rnn: number;
  cudnn: number;
}

function featuresOf(p: AccuracyPair): Features {
  const base = memoryAt(p.footprint, p.setup, p.micro_batch, { ...DEFAULT_CONSTANTS, ...ZERO });
  const c = base.components;
  const staticBytes = c.weights + c.gradients + c.optimizer_state;
  const at = (k: Partial<PlanConstants>): number =>
    memoryAt(p.footprint, p.setup, p.micro_batch, { ...DEFAULT_CONSTANTS, ...ZERO, ...k }).peak_bytes - base.peak_bytes;
  return {
    static: staticBytes,
    dynamic: base.peak_bytes - staticBytes,
    conv: at({ conv_workspace_factor: 1 }),
    rnn: at({ rnn_workspace_factor: 1 }),
    cudnn: at({ cudnn_workspace_bytes: 1 }),
  };
}

/** Solves A x = b by Gaussian elimination with partial pivoting; null when singular. */
function solve(A: number[][], b: number[]): number[] | null {
  const n = b.length;
  const M = A.map((row, i) => [...row, b[i] ?? 0]);
  for (let col = 0; col < n; col++) {
    let pivot = col;
    for (let r = col + 1; r < n; r++) if (Math.abs(M[r]![col]!) > Math.abs(M[pivot]![col]!)) pivot = r;
    if (Math.abs(M[pivot]![col]!) < 1e-12) return null;
    [M[col], M[pivot]] = [M[pivot]!, M[col]!];
    for (let r = 0; r < n; r++) {
      if (r === col) continue;
      const f = M[r]![col]! / M[col]![col]!;
      for (let k = col; k <= n; k++) M[r]![k]! -= f * M[col]![k]!;
    }
  }
  return M.map((row, i) => row[n]! / row[i]!);
}

const GiB = 2 ** 30;
type Free = "fixed" | "cudnn" | "conv" | "rnn";
type Solution = Record<Free, number>;

function predictFeatures(f: Features, slack: number, k: Solution): number {
  return f.static + (1 + slack) * (f.dynamic + k.conv * f.conv + k.rnn * f.rnn) + k.cudnn * f.cudnn + k.fixed;
}

/**
 * Under-estimates cost this many times more than over-estimates in the fit (an expectile, not a
 * mean): a plan that is a little high costs some throughput, one that is low costs the run.
 */
export const UNDER_WEIGHT = 5;

/**
 * Asymmetric least squares on relative error for the `free` constants, the others held at `held`;
 * the slack is searched on a grid (it multiplies the others) unless given. A constant that comes
 * out negative is held at 0 and the rest fitted again.
 */
function leastSquares(
  pairs: readonly AccuracyPair[],
  feats: readonly Features[],
  free: readonly Free[],
  held: Solution,
  slacks: readonly number[],
): { slack: number; k: Solution; sse: number } | null {
  const value: Record<Free, (f: Features, slack: number) => number> = {
    fixed: () => 1,
    cudnn: (f) => f.cudnn / GiB,
    conv: (f, s) => ((1 + s) * f.conv) / GiB,
    rnn: (f, s) => ((1 + s) * f.rnn) / GiB,
  };
  const scale: Record<Free, number> = { fixed: GiB, cudnn: 1, conv: 1, rnn: 1 };
  const loss = (k: Solution, slack: number): number =>
    pairs.reduce((sum, p, i) => {
      const e = (predictFeatures(feats[i]!, slack, k) - p.measured) / p.measured;
      return sum + (e < 0 ? UNDER_WEIGHT : 1) * e * e;
    }, 0);
  let best: { slack: number; k: Solution; sse: number } | null = null;
  for (const slack of slacks) {
    const cols = [...free];
    let base: Solution = { ...held };
    let k: Solution | null = null;
    while (k === null) {
      let current: Solution = { ...base };
      let negative = -1;
      // iteratively reweighted: each pass weights the pairs the previous one put below the measurement
      for (let pass = 0; pass < 12; pass++) {
        const trial: Solution = { ...base };
        for (const c of cols) trial[c] = 0;
        const A = cols.map(() => cols.map(() => 0));
        const b = cols.map(() => 0);
        pairs.forEach((p, i) => {
          const f = feats[i]!;
          const under = pass > 0 && predictFeatures(f, slack, current) < p.measured;
          const w = (under ? UNDER_WEIGHT : 1) / (p.measured / GiB) ** 2;
          const x = cols.map((c) => value[c](f, slack));
          const y = (p.measured - predictFeatures(f, slack, trial)) / GiB;
          for (let r = 0; r < cols.length; r++) {
            b[r]! += w * x[r]! * y;
            for (let c = 0; c < cols.length; c++) A[r]![c]! += w * x[r]! * x[c]!;
          }
        });
        const sol = cols.length === 0 ? [] : solve(A, b);
        if (sol === null) return best;
        negative = cols.findIndex((c, i) => c !== "fixed" && sol[i]! < 0);
        if (negative >= 0) break;
        cols.forEach((c, i) => (trial[c] = sol[i]! * scale[c]));
        current = trial;
      }
      if (negative >= 0) {
        base = { ...base, [cols[negative]!]: 0 };
        cols.splice(negative, 1);
        continue;
      }
      k = current;
    }
    const sse = loss(k, slack);
    if (best === null || sse < best.sse) best = { slack, k, sse };
  }
  return best;
}

const SLACK_GRID = Array.from({ length: 321 }, (_, i) => i * 0.0025);

/**
 * Fits the constants to pairs by least squares on relative error: the fixed bytes (context and
 * cuBLAS workspace), the cuDNN fixed bytes, the allocator slack, and a cuDNN workspace factor
 * wherever the pairs identify it. A factor is identified by a job that has that workspace and no
 * other; a factor seen only beside another one is fitted after the other is known, and keeps its
 * default when both are unknown (one job cannot tell two workspaces apart). The CUDA context is
 * the median memory measured outside the allocator in jobs without cuDNN, the rest of the fixed
 * bytes the cuBLAS workspace.
 *
 * @example
 * ```ts
 * const fit = fitConstants(pairs);
 * fit?.allocator_slack_fraction; // e.g. 0.12
 * ```
 */
export function fitConstants(pairs: readonly AccuracyPair[]): FittedConstants | null {
  if (pairs.length === 0) return null;
  const feats = pairs.map(featuresOf);
  const kinds = (i: number): ("conv" | "rnn")[] => (["conv", "rnn"] as const).filter((k) => feats[i]![k] > 0);
  const jobKinds = new Map<string, Set<"conv" | "rnn">>();
  pairs.forEach((p, i) => {
    const set = jobKinds.get(p.job) ?? new Set();
    kinds(i).forEach((k) => set.add(k));
    jobKinds.set(p.job, set);
  });
  const alone = new Set<"conv" | "rnn">();
  for (const set of jobKinds.values()) if (set.size === 1) alone.add([...set][0]!);
  const usable = (i: number): boolean => [...(jobKinds.get(pairs[i]!.job) ?? [])].every((k) => alone.has(k));
  const first = pairs.map((_, i) => i).filter(usable);
  const anyCudnn = first.some((i) => feats[i]!.cudnn > 0);
  const noCudnn = first.some((i) => feats[i]!.cudnn === 0);
  const defaults: Solution = {
    fixed: 0,
    cudnn: DEFAULT_CONSTANTS.cudnn_workspace_bytes,
    conv: DEFAULT_CONSTANTS.conv_workspace_factor,
    rnn: DEFAULT_CONSTANTS.rnn_workspace_factor,
  };
  const free: Free[] = ["fixed", ...(anyCudnn && noCudnn ? (["cudnn"] as const) : []), ...alone];
  const stage1 = leastSquares(
    first.map((i) => pairs[i]!),
    first.map((i) => feats[i]!),
    free,
    defaults,
    SLACK_GRID,
  );
  if (stage1 === null) return null;
  let k = stage1.k;
  // factors seen only beside one another: fitted one at a time once the others are known
  for (const kind of ["conv", "rnn"] as const) {
    if (alone.has(kind)) continue;
    const jobs = [...jobKinds].filter(([, set]) => set.has(kind) && [...set].every((other) => other === kind || alone.has(other))).map(([job]) => job);
    const idx = pairs.map((_, i) => i).filter((i) => jobs.includes(pairs[i]!.job));
    if (idx.length === 0) continue;
    const stage2 = leastSquares(
      idx.map((i) => pairs[i]!),
      idx.map((i) => feats[i]!),
      [kind],
      k,
      [stage1.slack],
    );
    if (stage2 !== null) k = stage2.k;
  }
  const outsideOf = (withCudnn: boolean): number[] =>
    pairs.filter((p, i) => feats[i]!.cudnn > 0 === withCudnn && p.outside_allocator !== undefined).map((p) => p.outside_allocator!);
  const outside = outsideOf(false);
  const context = median(outside) ?? Math.min(k.fixed, DEFAULT_CONSTANTS.cuda_context_bytes);
  // not determined by the fit: what cuDNN's handle adds outside the allocator, measured directly
  const cudnnOutside = outsideOf(true);
  const cudnn = free.includes("cudnn") || cudnnOutside.length === 0 || outside.length === 0 ? k.cudnn : Math.max(0, (median(cudnnOutside) ?? 0) - context);
  return {
    cuda_context_bytes: Math.round(context),
    cublas_workspace_bytes: Math.max(0, Math.round(k.fixed - context)),
    cudnn_workspace_bytes: Math.round(cudnn),
    allocator_slack_fraction: stage1.slack,
    conv_workspace_factor: round4(k.conv),
    rnn_workspace_factor: round4(k.rnn),
  };
}

function round4(x: number): number {
  return Math.round(x * 1e4) / 1e4;
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
