import type { Anchor, TrialMeasurement } from "./anchor.ts";
import type { Calibration, CalibrationUse } from "./constants.ts";
import type { ModelFootprint } from "./footprint.ts";
import type { Component, Offload, Sharding } from "./memory.ts";
import type { Optimizer, Precision } from "./spec.ts";

/** What to plan for. Every field is optional but the GPU: `gpu` or `gpuMemoryBytes`. */
export interface PlanOptions {
  gpu?: string | undefined;
  gpuMemoryBytes?: number | undefined;
  precision?: Precision | undefined;
  optimizer?: Optimizer | undefined;
  batch?: number | undefined;
  effectiveBatch?: number | undefined;
  seqLen?: number | undefined;
  checkpointing?: boolean | undefined;
  /** GPUs per node (all of them with one node) */
  gpus?: number | undefined;
  /** nodes; the ranks are gpus × nodes */
  nodes?: number | undefined;
  sharding?: Sharding | undefined;
  /** what lives in host RAM instead of the GPU; none by default */
  offload?: Offload | undefined;
  capBytes?: number | undefined;
  /** share of the cap kept free, 0.1 by default */
  margin?: number | undefined;
  /** measured calibrations to use; the bundled ones ({@link CALIBRATIONS}) by default */
  calibrations?: readonly Calibration[] | undefined;
  /** the PyTorch major version the job runs (calibrations are per major version); 2 by default */
  frameworkMajor?: number | undefined;
  /** a calibrating trial of this job: the plan is re-anchored on its measured peak */
  trial?: PlanTrial | undefined;
}

/** A calibrating trial as the planner takes it: what ran, and what it measured. */
export interface PlanTrial extends TrialMeasurement {
  precision: Precision;
  /** what the peak is: the process tree's GPU memory, or its RAM when the job ran on the CPU */
  memory: "gpu" | "ram";
  /** where it was measured, e.g. "run 20261122-145759-4fa3 (python3 train.py)" */
  source: string;
}

/** One ranked way to reach the effective batch. */
export interface Suggestion {
  micro_batch: number;
  accumulation: number;
  precision: Precision;
  checkpointing: boolean;
  peak_bytes: number;
  samples_per_s: number;
  relative_speed: number;
  /** predicted samples/s over those of the user's config (1 = the same) */
  speedup_vs_yours: number;
  /** this row is the user's config */
  is_yours: boolean;
}

/** The configuration the user has now (spec, config or flags), as the plan predicts it. */
export interface YourConfig {
  micro_batch: number;
  accumulation: number;
  precision: Precision;
  checkpointing: boolean;
  peak_bytes: number;
  /** share of the budget (cap × (1 − margin)) the predicted peak uses */
  budget_share: number;
  samples_per_s: number;
}

/** The plan of one model shape (the whole model, or one training stage). */
export interface PlanSection {
  name?: string;
  seq_len?: number;
  params: { total: number; trainable: number; frozen: number };
  setup: {
    precision: Precision;
    optimizer: Optimizer;
    micro_batch: number;
    micro_batch_from: "--batch" | "spec" | "largest that fits";
    accumulation: number;
    effective_batch: number;
    checkpointing: boolean;
    /** ranks in all: GPUs per node × nodes */
    gpus: number;
    nodes: number;
    sharding: Sharding;
    offload: Offload;
  };
  memory: {
    components: Record<Component, number>;
    shares: Record<Component, number>;
    peak_bytes: number;
    fits: boolean;
    /** host RAM one node needs for the offloaded states (0 without offload) */
    host_bytes_per_node: number;
  };
  max_micro_batch: number;
  /** false when the whole per-GPU effective batch fits in one micro-batch: memory does not limit the job */
  memory_limited: boolean;
  your_config: YourConfig;
  suggestions: Suggestion[];
  notes: string[];
}

/** A named value the plan used, with its source. */
export interface Assumption {
  name: string;
  value: number | string;
  source: string;
  calibrated: boolean;
}

/** The whole answer of `brim plan`. */
export interface PlanReport extends PlanSection {
  model: { name: string; family: string; source: ModelFootprint["source"]; file?: string };
  gpu: { id: string; name: string; memory_bytes: number; cap_bytes: number; margin: number; budget_bytes: number; gpus: number; nodes: number };
  stages: PlanSection[];
  speed_model: string;
  /** the GPU calibration the plan used and which constants it set (the rest are defaults); null when none matched */
  calibration: CalibrationUse | null;
  /** the calibrating trial the plan was re-anchored on, and what the model had said at its micro-batch; null without one */
  trial: (PlanTrial & { predicted_before_bytes: number; correction: Anchor }) | null;
  assumptions: Assumption[];
}

/** `brim plan --measure -- <command>` without a model spec: the job's peak measured at its config, against the memory there is. */
export interface MeasuredJobPlan {
  schema: "brim.plan-measured/v1";
  run_id: string;
  command: string[];
  memory: "gpu" | "ram";
  device: string;
  micro_batch: number | null;
  precision: string | null;
  steps: number;
  peak_bytes: number;
  limit_bytes: number;
  limit_source: "--gpu-memory" | "--cap" | "gpu_total" | "host_total";
  margin: number;
  usable_bytes: number;
  fits: boolean;
  /** the micro-batch at which the whole peak, scaled with the micro-batch, reaches the usable memory: a lower bound of the largest that fits */
  largest_micro_batch_at_least: number | null;
}
