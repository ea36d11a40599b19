import type { PlanConstants } from "./constants.ts";
import { engineBuffers, hostBytesPerNode, shardFactor, zeroStage, type ParallelSetup } from "./distributed.ts";
import { precisionBytes, type ModelFootprint } from "./footprint.ts";
import { elementsOf } from "./graph.ts";
import type { Optimizer, Precision } from "./spec.ts";

export { OFFLOADS, SHARDINGS, type Offload, type Sharding } from "./distributed.ts";

/** Everything about the training run that changes its memory; `gpus` counts the ranks of all nodes. */
export interface TrainingSetup extends ParallelSetup {
  precision: Precision;
  optimizer: Optimizer;
  checkpointing: boolean;
}

/** The memory components, in the order they are reported. */
export const COMPONENTS = [
  "weights",
  "gradients",
  "optimizer_state",
  "communication",
  "activations",
  "input_batch",
  "temporaries",
  "workspace",
  "cuda_context",
  "allocator_slack",
] as const;
/** One component's name. */
export type Component = (typeof COMPONENTS)[number];

/** Bytes of each component and their sum, the predicted peak, per GPU; and the host RAM one node needs for what is offloaded. */
export interface MemoryBreakdown {
  components: Record<Component, number>;
  peak_bytes: number;
  /** host RAM per node for offloaded states (0 without --offload) */
  host_bytes_per_node: number;
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

/** The model states on one GPU, and what its rank keeps in host RAM instead. */
interface ModelStates {
  weights: number;
  gradients: number;
  optimizer_state: number;
  /** bytes this rank offloads to host RAM */
  offloaded: number;
}

/**
 * DeepSpeed ZeRO in 16-bit mixed precision, as its estimators count it (`estimate_zero2_model_states_mem_needs`,
 * `estimate_zero3_model_states_mem_needs`, DeepSpeed 0.19.8): the module's parameters are 16-bit (2P, or
 * 2P/N plus the largest layer gathered under ZeRO-3), the gradients 16-bit and fp32 in the partition,
 * the optimizer holds the fp32 master copy beside its fp32 state. Per rank, with N ranks and L the
 * largest layer: ZeRO-1 4P + 16P/N (the pre-#5099 ZeRO-2 line: 16-bit gradients not partitioned),
 * ZeRO-2 2P + 18P/N, ZeRO-3 4L + 18P/N (its estimator's 18: the fp32 gradient partition is not
 * counted apart there) with Adam. CPU offload (ZeRO-Offload) moves the fp32 gradient partition,
 * the master copy and the optimizer state to the host (16P/N with Adam; ZeRO-2's 16-bit gradient
 * partition is then not kept: GPU 2P, the estimator's `cpu_offload=True` line), and with
 * `--offload params` under ZeRO-3 the 16-bit parameter partition too (GPU 4L, host 18P/N).
 * Null for other setups.
 */
function zeroModelStates(setup: TrainingSetup, params: ModelFootprint["params"]): ModelStates | null {
  const stage = zeroStage(setup.sharding);
  if (stage === 0 || !precisionBytes(setup.precision).mixed) return null;
  const n = Math.max(1, setup.gpus);
  const offOptimizer = (setup.offload ?? "none") !== "none";
  const offParams = setup.offload === "params";
  const { total, trainable, largestTensorElems: largest } = params;
  const fp32State = optimizerStateBytes(setup.optimizer, "fp32", trainable, params.tensors);
  const fp32Gradients = (4 * trainable) / n;
  const optimizer = (4 * trainable + fp32State) / n;
  const weights = stage === 3 ? (offParams ? 0 : (2 * total) / n) + 2 * largest : 2 * total;
  const kept = offOptimizer ? 0 : fp32Gradients;
  const gradients = stage === 1 ? 2 * trainable + kept : stage === 2 ? (offOptimizer ? 0 : (6 * trainable) / n) : kept + 2 * largest;
  return {
    weights: Math.ceil(weights),
    gradients: Math.ceil(gradients),
    optimizer_state: Math.ceil(offOptimizer ? 0 : optimizer),
    offloaded: Math.ceil(offOptimizer ? fp32Gradients + optimizer + (offParams ? (2 * total) / n : 0) : 0),
  };
}

/**
 * The model states of every other setup: each state divided over the ranks that shard it. Offload
 * moves the optimizer state (and a gradient partition) to the host, and with `params` the weight
 * and gradient shards too (FSDP's CPUOffload(offload_params=True): the optimizer step runs on the
 * CPU). SHARD_GRAD_OP keeps the whole model unsharded, in the compute dtype, from forward to the
 * end of backward, beside its shards.
 */
function shardedStates(setup: TrainingSetup, params: ModelFootprint["params"]): ModelStates {
  const bytes = precisionBytes(setup.precision);
  const { total, trainable } = params;
  let weights = Math.ceil((total * bytes.weight) / shardFactor(setup, "weights"));
  let gradients = Math.ceil((trainable * bytes.weight) / shardFactor(setup, "gradients"));
  let optimizer_state = Math.ceil(optimizerStateBytes(setup.optimizer, setup.precision, trainable, params.tensors) / shardFactor(setup, "optimizer"));
  let offloaded = 0;
  const offload = setup.offload ?? "none";
  if (offload !== "none") {
    offloaded += optimizer_state;
    optimizer_state = 0;
    if (offload === "params" || shardFactor(setup, "gradients") > 1) {
      offloaded += gradients;
      gradients = 0;
    }
    if (offload === "params") {
      offloaded += weights;
      weights = 0;
    }
  }
  // FSDP's MixedPrecisionPolicy gathers 16-bit parameters; without it they are gathered as stored
  if (setup.sharding === "shard-grad-op" && setup.gpus > 1) weights += total * (bytes.mixed ? bytes.compute : bytes.weight);
  return { weights, gradients, optimizer_state, offloaded };
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
  const { weights, gradients, optimizer_state, offloaded } = zero ?? shardedStates(setup, footprint.params);

  const perSample = setup.checkpointing ? (act.perSampleCheckpointed ?? act.perSample) : act.perSample;
  // under ZeRO the parameters themselves are 16-bit: no autocast copy of them
  const activations = Math.ceil(microBatch * perSample + (zero === null ? act.fixed : 0));
  const input_batch = microBatch * footprint.inputBytesPerSample;
  // backward holds the gradient of the largest activation and of its input at once (or what the
  // most demanding op's backward allocates, where the graph knows it), and cuDNN's workspaces (the
  // allocator keeps each kind's block cached, so they add up in the reserved view)
  const cudnnWorkspaces = constants.conv_workspace_factor * act.workspacePerSample.conv + constants.rnn_workspace_factor * act.workspacePerSample.rnn;
  const backwardBuffers = microBatch * ((act.backwardPerSample ?? 2 * act.largestPerSample) + cudnnWorkspaces);
  // an offloaded optimizer steps on the CPU: no working memory on the GPU
  const stepTemporary =
    (setup.offload ?? "none") !== "none" ? 0 : optimizerStepTemporary(setup.optimizer, setup.precision, trainable) / shardFactor(setup, "optimizer");
  // FSDP's all-gather: the gathered largest unit and the next one prefetched (ZeRO-3's gathered
  // layer is in its model states already, DeepSpeed's 4L); they come and go with each unit, so the
  // allocator's slack covers them like the temporaries
  const gatheredWeights = zero !== null ? 0 : shardFactor(setup, "weights") > 1 ? 2 * footprint.params.largestTensorElems * bytes.weight : 0;
  // the engine's own buffers: DDP's gradient buckets, ZeRO's reduce and prefetch buckets (16-bit gradients under mixed precision)
  const buffers = engineBuffers(setup, footprint.params, { gradient: bytes.mixed ? bytes.compute : bytes.weight, weight: bytes.weight });
  const communication = Math.ceil(gatheredWeights + buffers);
  const temporaries = Math.ceil(Math.max(backwardBuffers, stepTemporary - activations - input_batch, 0));

  const workspace = constants.cublas_workspace_bytes + (footprint.usesCudnn ? constants.cudnn_workspace_bytes : 0);
  const cuda_context = constants.cuda_context_bytes;
  const allocator_slack = Math.ceil(constants.allocator_slack_fraction * (activations + input_batch + temporaries + gatheredWeights));

  const components: Record<Component, number> = {
    weights,
    gradients,
    optimizer_state,
    communication,
    activations,
    input_batch,
    temporaries,
    workspace,
    cuda_context,
    allocator_slack,
  };
  const peak_bytes = Object.values(components).reduce((a, b) => a + b, 0);
  return { components, peak_bytes, host_bytes_per_node: hostBytesPerNode(setup, offloaded, total) };
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
