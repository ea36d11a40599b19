import type { PlanConstants } from "./constants.ts";
import { precisionBytes, type ModelFootprint } from "./footprint.ts";
import { elementsOf } from "./graph.ts";
import type { Optimizer, Precision } from "./spec.ts";

/** How the training states are split over GPUs. */
export const SHARDINGS = ["none", "ddp", "zero1", "zero2", "zero3", "fsdp"] as const;
/** A sharding strategy. */
export type Sharding = (typeof SHARDINGS)[number];

/** Everything about the training run that changes its memory. */
export interface TrainingSetup {
  precision: Precision;
  optimizer: Optimizer;
  checkpointing: boolean;
  gpus: number;
  sharding: Sharding;
}

/** The memory components, in the order they are reported. */
export const COMPONENTS = [
  "weights",
  "gradients",
  "optimizer_state",
  "activations",
  "input_batch",
  "temporaries",
  "workspace",
  "cuda_context",
  "allocator_slack",
] as const;
/** One component's name. */
export type Component = (typeof COMPONENTS)[number];

/** Bytes of each component and their sum, the predicted peak, per GPU. */
export interface MemoryBreakdown {
  components: Record<Component, number>;
  peak_bytes: number;
}

/**
 * Bytes of optimizer state for the trainable parameters. Mixed precision keeps the state in fp32;
 * pure bf16 keeps it in bf16 (PyTorch's optimizers allocate state like the parameter).
 *
 * @example
 * ```ts
 * optimizerStateBytes("adamw", "fp32", 1000, undefined); // 8000
 * ```
 */
export function optimizerStateBytes(optimizer: Optimizer, precision: Precision, trainable: number, tensors: ModelFootprint["params"]["tensors"]): number {
  const state = precisionBytes(precision).weight;
  switch (optimizer) {
    case "sgd":
      return 0;
    case "sgd-momentum":
      return trainable * state;
    case "adam":
    case "adamw":
      return 2 * trainable * state;
    case "adamw-8bit":
      // two 8-bit moments plus one fp32 absmax per 2048-element block and moment (bitsandbytes' blockwise quantisation)
      return 2 * trainable + 2 * 4 * Math.ceil(trainable / 2048);
    case "adafactor": {
      // factored second moment: rows + columns for matrices, full for vectors; no first moment (beta1 = None)
      if (tensors === undefined) return Math.ceil(trainable * 0.01) * state;
      let elems = 0;
      for (const t of tensors) {
        if (!t.trainable) continue;
        const dims = t.shape;
        if (dims.length >= 2) {
          const cols = dims[dims.length - 1] ?? 1;
          const rows = elementsOf(dims) / cols;
          elems += rows + cols;
        } else {
          elems += elementsOf(dims);
        }
      }
      return elems * state;
    }
  }
}

/** Working memory of the optimizer step beyond its state: multi-tensor Adam keeps one state-sized temporary. */
function optimizerStepTemporary(optimizer: Optimizer, precision: Precision, trainable: number): number {
  const state = precisionBytes(precision).weight;
  switch (optimizer) {
    case "adam":
    case "adamw":
    case "adafactor":
      return trainable * state;
    default:
      return 0;
  }
}

/**
 * DeepSpeed ZeRO in 16-bit mixed precision, as its estimators count it (`estimate_zero2_model_states_mem_needs`,
 * `estimate_zero3_model_states_mem_needs`, DeepSpeed 0.19): the module's parameters are 16-bit (2P, or
 * 2P/N plus the largest layer gathered under ZeRO-3), the gradients 16-bit and fp32 in the partition,
 * the optimizer holds the fp32 master copy beside its fp32 state. Per rank, with N ranks and L the
 * largest layer: ZeRO-1 4P + 16P/N (the pre-#5099 ZeRO-2 line: 16-bit gradients not partitioned),
 * ZeRO-2 2P + 18P/N, ZeRO-3 4L + 18P/N (its estimator's 18: the fp32 gradient partition is not
 * counted apart there) with Adam. Null for other setups.
 */
function zeroModelStates(
  setup: TrainingSetup,
  params: ModelFootprint["params"],
): { weights: number; gradients: number; optimizer_state: number; gathered: number } | null {
  const stage = setup.sharding === "zero1" ? 1 : setup.sharding === "zero2" ? 2 : setup.sharding === "zero3" ? 3 : 0;
  if (stage === 0 || !precisionBytes(setup.precision).mixed) return null;
  const n = Math.max(1, setup.gpus);
  const { total, trainable, largestTensorElems: largest } = params;
  const fp32State = optimizerStateBytes(setup.optimizer, "fp32", trainable, params.tensors);
  return {
    weights: Math.ceil(stage === 3 ? (2 * total) / n + 2 * largest : 2 * total),
    gradients: Math.ceil(stage === 1 ? 2 * trainable + (4 * trainable) / n : stage === 2 ? (6 * trainable) / n : (4 * trainable) / n + 2 * largest),
    optimizer_state: Math.ceil((4 * trainable + fp32State) / n),
    gathered: stage === 3 ? 4 * largest : 0,
  };
}

function shardFactor(setup: TrainingSetup, state: "weights" | "gradients" | "optimizer"): number {
  if (setup.gpus <= 1) return 1;
  const level = { none: 0, ddp: 0, zero1: 1, zero2: 2, zero3: 3, fsdp: 3 }[setup.sharding];
  const needs = { optimizer: 1, gradients: 2, weights: 3 }[state];
  return level >= needs ? setup.gpus : 1;
}

/**
 * The memory model: predicted peak per GPU of one training step at micro-batch `microBatch`.
 *
 * peak = weights + gradients + optimizer state + workspace + CUDA context
 *      + max(activations + input batch + backward buffers, optimizer-step working memory)
 *      + allocator slack × (the part that changes per step).
 *
 * @example
 * ```ts
 * const m = memoryAt(footprint, { precision: "bf16-mixed", optimizer: "adamw", checkpointing: false, gpus: 1, sharding: "none" }, 32, constants);
 * m.peak_bytes;
 * ```
 */
export function memoryAt(footprint: ModelFootprint, setup: TrainingSetup, microBatch: number, constants: PlanConstants): MemoryBreakdown {
  const bytes = precisionBytes(setup.precision);
  const { total, trainable } = footprint.params;
  const act = footprint.activations[setup.precision];

  const zero = zeroModelStates(setup, footprint.params);
  // DDP without gradient_as_bucket_view keeps a second copy of the gradients in its buckets
  const ddpBuckets = setup.gpus > 1 && (setup.sharding === "ddp" || setup.sharding === "none") ? 2 : 1;
  const weights = zero?.weights ?? Math.ceil((total * bytes.weight) / shardFactor(setup, "weights"));
  const gradients = zero?.gradients ?? Math.ceil((trainable * bytes.weight * ddpBuckets) / shardFactor(setup, "gradients"));
  const optimizer_state =
    zero?.optimizer_state ??
    Math.ceil(optimizerStateBytes(setup.optimizer, setup.precision, trainable, footprint.params.tensors) / shardFactor(setup, "optimizer"));

  const perSample = setup.checkpointing ? (act.perSampleCheckpointed ?? act.perSample) : act.perSample;
  // under ZeRO the parameters themselves are 16-bit: no autocast copy of them
  const activations = Math.ceil(microBatch * perSample + (zero === null ? act.fixed : 0));
  const input_batch = microBatch * footprint.inputBytesPerSample;
  // backward holds the gradient of the largest activation and of its input at once (or what the
  // most demanding op's backward allocates, where the graph knows it), and cuDNN's workspaces (the
  // allocator keeps each kind's block cached, so they add up in the reserved view)
  const cudnnWorkspaces = constants.conv_workspace_factor * act.workspacePerSample.conv + constants.rnn_workspace_factor * act.workspacePerSample.rnn;
  const backwardBuffers = microBatch * ((act.backwardPerSample ?? 2 * act.largestPerSample) + cudnnWorkspaces);
  const stepTemporary = optimizerStepTemporary(setup.optimizer, setup.precision, trainable) / shardFactor(setup, "optimizer");
  // ZeRO-3's gathered layer is in its model states already (DeepSpeed's 4L)
  const gatheredWeights = zero !== null ? 0 : shardFactor(setup, "weights") > 1 ? 2 * footprint.params.largestTensorElems * bytes.weight : 0;
  const temporaries = Math.ceil(Math.max(backwardBuffers, stepTemporary - activations - input_batch, 0) + gatheredWeights);

  const workspace = constants.cublas_workspace_bytes + (footprint.usesCudnn ? constants.cudnn_workspace_bytes : 0);
  const cuda_context = constants.cuda_context_bytes;
  const allocator_slack = Math.ceil(constants.allocator_slack_fraction * (activations + input_batch + temporaries));

  const components: Record<Component, number> = {
    weights,
    gradients,
    optimizer_state,
    activations,
    input_batch,
    temporaries,
    workspace,
    cuda_context,
    allocator_slack,
  };
  const peak_bytes = Object.values(components).reduce((a, b) => a + b, 0);
  return { components, peak_bytes };
}

/**
 * The largest micro-batch whose predicted peak is within `budgetBytes`, or 0 if not even one
 * sample fits. Peak is non-decreasing in the micro-batch, so a galloping then binary search finds it.
 *
 * @example
 * ```ts
 * maxMicroBatch((b) => memoryAt(fp, setup, b, constants).peak_bytes, 20 * 2 ** 30); // e.g. 96
 * ```
 */
export function maxMicroBatch(peakAt: (microBatch: number) => number, budgetBytes: number, limit = 2 ** 24): number {
  if (peakAt(1) > budgetBytes) return 0;
  let low = 1;
  let high = 2;
  while (high <= limit && peakAt(high) <= budgetBytes) {
    low = high;
    high *= 2;
  }
  if (high > limit) return low;
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (peakAt(mid) <= budgetBytes) low = mid;
    else high = mid;
  }
  return low;
}
