/**
 * Constants the plan depends on that vary with the GPU, the driver and the framework version. Each
 * carries its source; a calibration measured on a GPU replaces them (see {@link Calibration}).
 * @module
 */

const MiB = 2 ** 20;

/** The named constants of the memory and speed models. */
export interface PlanConstants {
  /** memory the CUDA context and loaded kernel images hold per process, outside PyTorch's allocator */
  cuda_context_bytes: number;
  /** cuBLAS/cuBLASLt workspace per process */
  cublas_workspace_bytes: number;
  /** cuDNN workspace for convolutions and recurrent layers */
  cudnn_workspace_bytes: number;
  /** caching-allocator rounding and fragmentation, as a fraction of the memory that changes per step */
  allocator_slack_fraction: number;
  /** cuDNN convolution workspace per sample, as a multiple of the largest conv's im2col matrix */
  conv_workspace_factor: number;
  /** cuDNN recurrent backward workspace per sample, as a multiple of one layer's gate and hidden-state gradients */
  rnn_workspace_factor: number;
  /** share of a GPU's dense peak that large matmuls reach */
  peak_efficiency: number;
  /** matmul rows (micro-batch × tokens) at which efficiency is half of `peak_efficiency` */
  half_efficiency_rows: number;
  /** launch cost per op, per forward+backward pass */
  op_overhead_s: number;
  /** Python and data hand-off cost per micro-step */
  step_overhead_s: number;
}

/** Where a constant's value comes from. */
export interface ConstantSource {
  source: string;
  calibrated: boolean;
}

/** The defaults, none measured by brim yet: each says so. */
export const DEFAULT_CONSTANTS: Readonly<PlanConstants> = {
  cuda_context_bytes: 512 * MiB,
  cublas_workspace_bytes: 32 * MiB,
  cudnn_workspace_bytes: 128 * MiB,
  allocator_slack_fraction: 0.1,
  conv_workspace_factor: 1,
  rnn_workspace_factor: 1,
  peak_efficiency: 0.5,
  half_efficiency_rows: 2048,
  op_overhead_s: 10e-6,
  step_overhead_s: 1e-3,
};

const DEFAULT_SOURCES: Record<keyof PlanConstants, string> = {
  cuda_context_bytes:
    "estimate: CUDA context with lazy loading 287,047,680 B (pytorch PR #86509) plus cuBLAS/cuDNN kernel images loaded on first use; not yet measured by brim",
  cublas_workspace_bytes: "PyTorch's default CUBLAS_WORKSPACE_CONFIG :4096:8 (8 × 4 MiB); not yet measured by brim",
  cudnn_workspace_bytes: "estimate for conv/recurrent models; the real size depends on the algorithm cuDNN picks (pytorch #49207); not yet measured by brim",
  allocator_slack_fraction: "estimate: caching allocator rounds large blocks to 2 MiB and fragments (pytorch #35901); not yet measured by brim",
  conv_workspace_factor:
    "estimate: one im2col matrix of the largest convolution (GEMM-based algorithms); cuDNN may pick FFT or Winograd algorithms with other sizes when memory is free (pytorch #49207); not yet measured by brim",
  rnn_workspace_factor:
    "estimate: backward-data holds one layer's gate and hidden-state gradients (cudnnRNNBackwardData_v8 workspace); not yet measured by brim",
  peak_efficiency: "speed model: assumed share of dense peak reached by large matmuls; not yet measured by brim",
  half_efficiency_rows: "speed model: assumed rows at half efficiency; not yet measured by brim",
  op_overhead_s: "speed model: kernel launch latency, about 5–10 µs per op; not yet measured by brim",
  step_overhead_s: "speed model: Python and data hand-off per micro-step; not yet measured by brim",
};

/** The machine and versions a calibration was measured with. */
export interface MeasuredOn {
  gpu: string;
  driver: string;
  cuda: string;
  torch: string;
  cudnn: string;
}

/**
 * Constants measured on a GPU (bench/results/gpu/…/calibration.json), used when planning for a GPU
 * of the same id or architecture and the same framework major version.
 *
 * @example
 * ```ts
 * const cal: Calibration = { id: "hopper-torch2", matches: ["hopper"], framework: { name: "torch", major: 2 }, measured_on, constants: { cuda_context_bytes: 7.8e8 }, source: "bench/results/gpu/nvidia-h100-80gb-hbm3/calibration.json" };
 * resolveConstants("h100-sxm", [cal], "hopper").values.cuda_context_bytes; // 7.8e8
 * ```
 */
export interface Calibration {
  id: string;
  /** GPU ids or architectures this calibration applies to */
  matches: readonly string[];
  framework: { name: "torch"; major: number };
  measured_on: MeasuredOn;
  constants: Partial<PlanConstants>;
  /** the fit's output file, which records its inputs and command */
  source: string;
}

/** Which calibration a plan used, and which constants it set. */
export interface CalibrationUse {
  id: string;
  framework: string;
  measured_on: MeasuredOn;
  source: string;
  calibrated: (keyof PlanConstants)[];
  defaults: (keyof PlanConstants)[];
}

/** Constants in force for one plan, each with where it came from. */
export interface ResolvedConstants {
  values: PlanConstants;
  sources: Record<keyof PlanConstants, ConstantSource>;
  calibration: CalibrationUse | null;
}

/** The framework major version plans assume when none is given: the calibrations' PyTorch 2. */
export const DEFAULT_FRAMEWORK_MAJOR = 2;

/**
 * Picks the constants for a GPU: defaults, overridden by the first calibration that matches the
 * GPU id or its architecture and the framework major version.
 *
 * @example
 * ```ts
 * resolveConstants("rtx-4090", []).sources.cuda_context_bytes.calibrated; // false
 * ```
 */
export function resolveConstants(
  gpuId: string | undefined,
  calibrations: readonly Calibration[],
  architecture?: string,
  frameworkMajor: number = DEFAULT_FRAMEWORK_MAJOR,
): ResolvedConstants {
  const values: PlanConstants = { ...DEFAULT_CONSTANTS };
  const sources = Object.fromEntries(Object.entries(DEFAULT_SOURCES).map(([k, source]) => [k, { source, calibrated: false }])) as Record<
    keyof PlanConstants,
    ConstantSource
  >;
  const match = calibrations.find((c) => c.framework.major === frameworkMajor && c.matches.some((m) => m === gpuId || m === architecture));
  if (match === undefined) return { values, sources, calibration: null };
  const on = match.measured_on;
  const calibrated: (keyof PlanConstants)[] = [];
  for (const [key, value] of Object.entries(match.constants) as [keyof PlanConstants, number | undefined][]) {
    if (value === undefined) continue;
    values[key] = value;
    sources[key] = {
      source: `calibrated on ${on.gpu} (driver ${on.driver}, CUDA ${on.cuda}, torch ${on.torch}, cuDNN ${on.cudnn}): ${match.source}`,
      calibrated: true,
    };
    calibrated.push(key);
  }
  return {
    values,
    sources,
    calibration: {
      id: match.id,
      framework: `${match.framework.name} ${match.framework.major}.x`,
      measured_on: on,
      source: match.source,
      calibrated,
      defaults: (Object.keys(DEFAULT_CONSTANTS) as (keyof PlanConstants)[]).filter((k) => !calibrated.includes(k)),
    },
  };
}
