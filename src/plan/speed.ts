import type { GpuSpec } from "./catalog.ts";
import type { PlanConstants } from "./constants.ts";
import { optimizerStateBytes, type TrainingSetup } from "./memory.ts";
import { precisionBytes, type ModelFootprint } from "./footprint.ts";
import type { Precision } from "./spec.ts";

/** The speed model, in words, as `brim plan` states it. */
export const SPEED_MODEL =
  "step time = accumulation × (micro-batch × training FLOPs per sample / (GPU dense peak for the precision × peak_efficiency × rows/(rows + half_efficiency_rows)) + ops × op_overhead_s + step_overhead_s) + optimizer step (parameter, gradient and state bytes read and written / memory bandwidth); training FLOPs = forward + backward (+ one more forward with checkpointing); rows = micro-batch × tokens per sample. A ranking aid, not a promise: `brim tune` measures.";

/** Peak TFLOP/s ratios of an A100 (fp32 19.5, tf32 156, fp16/bf16 312), used when no GPU model is named. */
const GENERIC_GPU: Pick<GpuSpec, "peakTflops" | "bandwidthGBs"> = {
  peakTflops: { fp32: 19.5, tf32: 156, fp16: 312, bf16: 312 },
  bandwidthGBs: 1555,
};

/**
 * Dense peak TFLOP/s a GPU offers for a precision, or undefined when it has no fast path for it
 * (bf16 before Ampere).
 *
 * @example
 * ```ts
 * peakFor(findGpu("rtx-4090")!, "bf16-mixed"); // 165.2
 * ```
 */
export function peakFor(gpu: Pick<GpuSpec, "peakTflops"> | undefined, precision: Precision): number | undefined {
  const peaks = (gpu ?? GENERIC_GPU).peakTflops;
  switch (precision) {
    case "fp32":
      return peaks.fp32;
    case "tf32":
      return peaks.tf32;
    case "fp16-mixed":
      return peaks.fp16;
    case "bf16-mixed":
    case "bf16":
      return peaks.bf16;
  }
}

/**
 * Predicted samples per second of one configuration under the stated speed model.
 *
 * @example
 * ```ts
 * predictedSamplesPerSecond(fp, setup, { microBatch: 32, accumulation: 2 }, gpu, constants);
 * ```
 */
export function predictedSamplesPerSecond(
  footprint: ModelFootprint,
  setup: TrainingSetup,
  step: { microBatch: number; accumulation: number },
  gpu: Pick<GpuSpec, "peakTflops" | "bandwidthGBs"> | undefined,
  constants: PlanConstants,
): number {
  const peak = peakFor(gpu, setup.precision) ?? (gpu ?? GENERIC_GPU).peakTflops.fp32;
  const { forward, backward } = footprint.flopsPerSample;
  const flops = forward + backward + (setup.checkpointing ? forward : 0);
  const rows = step.microBatch * footprint.rowsPerSample;
  const efficiency = constants.peak_efficiency * (rows / (rows + constants.half_efficiency_rows));
  const compute = (step.microBatch * flops) / (peak * 1e12 * efficiency);
  const overhead = footprint.opsPerPass * 3 * constants.op_overhead_s + constants.step_overhead_s;
  const bytes = precisionBytes(setup.precision);
  const stateBytes =
    footprint.params.total * bytes.weight +
    footprint.params.trainable * bytes.weight +
    optimizerStateBytes(setup.optimizer, setup.precision, footprint.params.trainable, footprint.params.tensors);
  const optimizerStep = (2 * stateBytes) / ((gpu ?? GENERIC_GPU).bandwidthGBs * 1e9);
  const stepTime = step.accumulation * (compute + overhead) + optimizerStep;
  return (step.microBatch * step.accumulation * setup.gpus) / stepTime;
}
