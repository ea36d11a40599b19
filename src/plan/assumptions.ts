import type { PlanConstants, ResolvedConstants } from "./constants.ts";
import type { ModelFootprint } from "./footprint.ts";
import type { ResolvedGpu } from "./gpu-choice.ts";
import type { TrainingSetup } from "./memory.ts";
import type { Assumption } from "./plan-types.ts";
import {
  DDP_BUCKET_CAP_MB,
  DEEPSPEED_HOST_BUFFER_FACTOR,
  isFsdp,
  ZERO3_PREFETCH_BUCKET_ELEMS,
  ZERO_ALLGATHER_BUCKET_ELEMS,
  ZERO_REDUCE_BUCKET_ELEMS,
  zeroStage,
} from "./distributed.ts";

/** The assumptions behind a plan, each with its value and where it comes from (shown by `brim plan --explain`). */
export function assumptionsOf(setup: TrainingSetup, constants: ResolvedConstants, gpu: ResolvedGpu, footprint: ModelFootprint): Assumption[] {
  const out: Assumption[] = [];
  for (const [name, value] of Object.entries(constants.values) as [keyof PlanConstants, number][]) {
    out.push({ name, value, ...constants.sources[name] });
  }
  out.push(
    { name: "gpu_memory_bytes", value: gpu.memoryBytes, source: gpu.memorySource + (gpu.spec === undefined ? "" : `; ${gpu.spec.source}`), calibrated: false },
    {
      name: "bytes_per_parameter",
      value: setup.precision === "bf16" ? "weights 2, gradients 2, optimizer state in bf16" : "weights 4, gradients 4, optimizer state in fp32",
      source: setup.precision.endsWith("-mixed")
        ? "mixed precision keeps fp32 master weights and gradients and a 16-bit copy of matmul weights during forward/backward (HF 'model training anatomy'; torch autocast weight cache)"
        : "PyTorch stores parameters, gradients and optimizer state in the parameter dtype",
      calibrated: false,
    },
    {
      name: "optimizer_state",
      value: setup.optimizer,
      source:
        "sgd 0, sgd-momentum 1 state, adam/adamw 2 states per trainable parameter; adamw-8bit 2 bytes + block absmax (bitsandbytes); adafactor factored second moment (rows + columns)",
      calibrated: false,
    },
    {
      name: "activations",
      value: footprint.source === "profile" ? "measured by the SDK on CPU" : "from the model graph, op by op",
      source:
        footprint.source === "profile"
          ? "saved-tensor hooks, per-sample slope between two batch sizes (docs/schemas/model-profile.v1.json)"
          : "tensors autograd keeps for backward as PyTorch's derivative formulas save them; a tensor kept by two ops counted once; attention through fused SDPA kernels (no seq² tensor) unless `attention: math`; see docs/model-spec.md",
      calibrated: false,
    },
    {
      name: "input_batch",
      value: "one micro-batch resident",
      source: "inputs and targets of the current micro-batch; a prefetched batch in flight is inside the margin",
      calibrated: false,
    },
    {
      name: "sharding",
      value: setup.sharding,
      source:
        "zero1 shards optimizer state, zero2 also gradients, zero3/fsdp also weights (plus two gathered tensors); ddp keeps a second copy of gradients in its buckets" +
        (setup.sharding === "shard-grad-op" || setup.sharding === "hybrid"
          ? "; shard-grad-op (SHARD_GRAD_OP) keeps the whole model unsharded in the compute dtype from forward to the end of backward; hybrid (HYBRID_SHARD) shards over the GPUs of one node and replicates across nodes"
          : "") +
        ((setup.offload ?? "none") === "none"
          ? ""
          : `; offload ${setup.offload ?? ""}: those states live in host RAM, counted per node (DeepSpeed's estimators: ×${DEEPSPEED_HOST_BUFFER_FACTOR}, additional_buffer_factor)`),
      calibrated: false,
    },
  );
  const buffers = communicationAssumption(setup);
  if (buffers !== undefined) out.push(buffers);
  return out;
}

/** The engine defaults behind the communication buffers; none on one GPU without ZeRO. */
function communicationAssumption(setup: TrainingSetup): Assumption | undefined {
  const stage = zeroStage(setup.sharding);
  const at = (n: number): string => n.toExponential(0).replace("+", "");
  if (stage > 0)
    return {
      name: "communication_buffers",
      value: `reduce_bucket_size ${at(ZERO_REDUCE_BUCKET_ELEMS)} elements${stage === 3 ? `, stage3_prefetch_bucket_size ${at(ZERO3_PREFETCH_BUCKET_ELEMS)}` : ""}`,
      source: `DeepSpeed 0.19.8 zero/config.py defaults; one reduce bucket allocated whole in the 16-bit gradient dtype (contiguous_gradients on, overlap_comm off below stage 3); allgather_bucket_size ${at(ZERO_ALLGATHER_BUCKET_ELEMS)} allocates nothing where all_gather_into_tensor exists`,
      calibrated: false,
    };
  if (setup.gpus <= 1) return undefined;
  if (isFsdp(setup.sharding))
    return {
      name: "communication_buffers",
      value: "all-gather of the largest unit, twice (current and prefetched)",
      source: "FSDP2 all-gathers one unit's parameters into a buffer and prefetches the next; the unit is taken as the largest parameter tensor",
      calibrated: false,
    };
  return {
    name: "communication_buffers",
    value: `DDP gradient buckets of bucket_cap_mb ${DDP_BUCKET_CAP_MB}`,
    source:
      "torch/nn/parallel/distributed.py _DEFAULT_BUCKET_CAP_MB (torch 2.13); gradient_as_bucket_view=False by default: the buckets are a second copy of every gradient",
    calibrated: false,
  };
}
