import type { PlanConstants, ResolvedConstants } from "./constants.ts";
import type { ModelFootprint } from "./footprint.ts";
import type { ResolvedGpu } from "./gpu-choice.ts";
import type { TrainingSetup } from "./memory.ts";
import type { Assumption } from "./plan-types.ts";

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
        "zero1 shards optimizer state, zero2 also gradients, zero3/fsdp also weights (plus two gathered tensors); ddp keeps a second copy of gradients in its buckets",
      calibrated: false,
    },
  );
  return out;
}
