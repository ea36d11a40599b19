/**
 * One calibrating trial: the memory model re-anchored on a peak measured at one micro-batch, so
 * that the other micro-batches are predicted from the model plus that one point.
 * @module
 */
import type { PlanConstants } from "./constants.ts";
import type { ModelFootprint } from "./footprint.ts";
import { memoryAt, type MemoryBreakdown, type TrainingSetup } from "./memory.ts";

/** One measured trial: the micro-batch and what was measured at it. */
export interface TrialMeasurement {
  micro_batch: number;
  /** the process tree's peak memory: GPU memory, or RAM when the job ran on the CPU */
  peak_bytes: number;
  /** PyTorch's peak allocated bytes, when the job reported them */
  allocated_bytes?: number | undefined;
  /** PyTorch's peak reserved bytes, when the job reported them */
  reserved_bytes?: number | undefined;
}

/** How a trial corrected the model: the batch-proportional part × scale, the slack as measured, plus an offset. */
export interface Anchor {
  /** what the correction was read from */
  on: "allocated" | "tree" | "offset";
  /** factor on the batch-proportional part (activations, input batch, backward buffers and workspaces) */
  scale: number;
  /** 1 + the allocator's slack on that part */
  grow: number;
  /** bytes added to every prediction (only when the measurement is below the model's fixed part) */
  offset: number;
}

const dynamicOf = (m: MemoryBreakdown): number => m.components.activations + m.components.input_batch + m.components.temporaries;

/**
 * Reads the correction a trial implies. With PyTorch's allocated peak the batch-proportional part
 * is scaled to meet it and the slack is the measured reserved − allocated (the context keeps its
 * calibrated value); with the process tree's peak alone, the batch-proportional part is scaled to
 * meet the tree peak; a tree peak below the model's fixed part (a CPU process, whose baseline is
 * not a CUDA context) moves the whole prediction by the difference instead.
 *
 * @example
 * ```ts
 * const anchor = anchorOn(footprint, setup, constants, { micro_batch: 64, peak_bytes: 3.1e9 });
 * anchoredMemory(memoryAt(footprint, setup, 128, constants), anchor).peak_bytes;
 * ```
 */
export function anchorOn(footprint: ModelFootprint, setup: TrainingSetup, constants: PlanConstants, trial: TrialMeasurement): Anchor {
  const m = memoryAt(footprint, setup, trial.micro_batch, constants);
  const d = dynamicOf(m);
  const slack = 1 + constants.allocator_slack_fraction;
  if (trial.allocated_bytes !== undefined && d > 0) {
    const c = m.components;
    const scale = (trial.allocated_bytes - (c.weights + c.gradients + c.optimizer_state + constants.cublas_workspace_bytes)) / d;
    if (scale > 0) {
      const grow = trial.reserved_bytes !== undefined ? Math.max(1, 1 + (trial.reserved_bytes - trial.allocated_bytes) / (scale * d)) : slack;
      return { on: "allocated", scale, grow, offset: 0 };
    }
  }
  const fixed = m.peak_bytes - slack * d;
  if (d > 0 && trial.peak_bytes > fixed) return { on: "tree", scale: (trial.peak_bytes - fixed) / (slack * d), grow: slack, offset: 0 };
  return { on: "offset", scale: 1, grow: slack, offset: trial.peak_bytes - m.peak_bytes };
}

/**
 * A breakdown under an anchor: the batch-proportional components scaled, the slack as measured,
 * and an offset (if any) carried by the context line. The components still sum to the peak.
 *
 * @example
 * ```ts
 * anchoredMemory(memoryAt(fp, setup, 256, k), anchor).peak_bytes;
 * ```
 */
export function anchoredMemory(m: MemoryBreakdown, anchor: Anchor): MemoryBreakdown {
  const c = m.components;
  const activations = Math.ceil(c.activations * anchor.scale);
  const input_batch = Math.ceil(c.input_batch * anchor.scale);
  const temporaries = Math.ceil(c.temporaries * anchor.scale);
  const allocator_slack = Math.ceil((anchor.grow - 1) * (activations + input_batch + temporaries));
  const cuda_context = Math.max(0, c.cuda_context + anchor.offset);
  const components = { ...c, activations, input_batch, temporaries, allocator_slack, cuda_context };
  return { components, peak_bytes: Object.values(components).reduce((a, b) => a + b, 0), host_bytes_per_node: m.host_bytes_per_node };
}

/**
 * The re-anchored peak at any micro-batch, for one footprint and setup.
 *
 * @example
 * ```ts
 * const { peakAt } = reanchor(fp, setup, k, { micro_batch: 64, peak_bytes: 3.1e9, allocated_bytes: 2.0e9 });
 * peakAt(128);
 * ```
 */
export function reanchor(
  footprint: ModelFootprint,
  setup: TrainingSetup,
  constants: PlanConstants,
  trial: TrialMeasurement,
): { peakAt: (microBatch: number) => number; scale: number; on: Anchor["on"] } {
  const anchor = anchorOn(footprint, setup, constants, trial);
  return { peakAt: (b) => anchoredMemory(memoryAt(footprint, setup, b, constants), anchor).peak_bytes, scale: anchor.scale, on: anchor.on };
}
