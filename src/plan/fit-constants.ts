/**
 * The fit of the planner's GPU- and framework-dependent constants to measured peaks: the CUDA
 * context and cuBLAS workspace, the cuDNN handle, the allocator slack and the cuDNN workspace
 * factors, by asymmetric least squares on relative error (src/plan/validation.ts scores them).
 * Pure.
 * @module
 */
import { DEFAULT_CONSTANTS, type PlanConstants } from "./constants.ts";
import type { ModelFootprint } from "./footprint.ts";
import { memoryAt, type TrainingSetup } from "./memory.ts";
import type { Precision } from "./spec.ts";
import { median } from "../stats.ts";

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

const ZERO: Partial<PlanConstants> = {
  cuda_context_bytes: 0,
  cublas_workspace_bytes: 0,
  cudnn_workspace_bytes: 0,
  allocator_slack_fraction: 0,
  conv_workspace_factor: 0,
  rnn_workspace_factor: 0,
};

/** The pair split into the parts the constants multiply, read off the memory model itself. */
export interface Features {
  static: number;
  dynamic: number;
  conv: number;
  rnn: number;
  cudnn: number;
}

export function featuresOf(p: AccuracyPair): Features {
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
