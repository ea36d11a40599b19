import { InputError } from "../errors/index.ts";

/**
 * How the training states are split over GPUs: replicated (`none`, `ddp`), DeepSpeed ZeRO stages
 * 1–3, and FSDP's strategies: `fsdp` (FULL_SHARD, FSDP2's `fully_shard`), `shard-grad-op`
 * (SHARD_GRAD_OP, `fully_shard(reshard_after_forward=False)`: the parameters stay unsharded from
 * forward to the end of backward) and `hybrid` (HYBRID_SHARD: FULL_SHARD within a node, replicated
 * across nodes).
 */
export const SHARDINGS = ["none", "ddp", "zero1", "zero2", "zero3", "fsdp", "shard-grad-op", "hybrid"] as const;
/** A sharding strategy. */
export type Sharding = (typeof SHARDINGS)[number];

/** What lives in host RAM instead of the GPU: `optimizer` (ZeRO-Offload), `params` (ZeRO-3 offload_param, FSDP CPUOffload; the optimizer too). */
export const OFFLOADS = ["none", "optimizer", "params"] as const;
/** A CPU offload choice. */
export type Offload = (typeof OFFLOADS)[number];

/** How a job is spread: ranks in all, the nodes they span, the sharding and the offload. */
export interface ParallelSetup {
  /** data-parallel ranks in all: GPUs per node × nodes */
  gpus: number;
  sharding: Sharding;
  /** nodes the ranks span; 1 when absent */
  nodes?: number | undefined;
  /** what lives in host RAM; none when absent */
  offload?: Offload | undefined;
}

const FSDP_FAMILY: ReadonlySet<Sharding> = new Set(["fsdp", "shard-grad-op", "hybrid"]);
const ZERO_STAGE: Partial<Record<Sharding, 1 | 2 | 3>> = { zero1: 1, zero2: 2, zero3: 3 };

/**
 * The DeepSpeed ZeRO stage of a sharding, or 0 for the others.
 *
 * @example
 * ```ts
 * zeroStage("zero2"); // 2
 * zeroStage("fsdp"); // 0
 * ```
 */
export function zeroStage(sharding: Sharding): 0 | 1 | 2 | 3 {
  return ZERO_STAGE[sharding] ?? 0;
}

/**
 * Whether a sharding is one of FSDP's strategies.
 *
 * @example
 * ```ts
 * isFsdp("hybrid"); // true
 * ```
 */
export function isFsdp(sharding: Sharding): boolean {
  return FSDP_FAMILY.has(sharding);
}

/**
 * GPUs (ranks) on one node.
 *
 * @example
 * ```ts
 * gpusPerNode({ gpus: 16, nodes: 2, sharding: "hybrid" }); // 8
 * ```
 */
export function gpusPerNode(setup: ParallelSetup): number {
  return Math.max(1, Math.floor(setup.gpus / Math.max(1, setup.nodes ?? 1)));
}

/**
 * The ranks one state is split over: the world for ZeRO and FSDP once their stage reaches that
 * state (optimizer from ZeRO-1, gradients from ZeRO-2, weights from ZeRO-3/FSDP), the node's GPUs
 * under HYBRID_SHARD, else 1 (replicated).
 *
 * @example
 * ```ts
 * shardFactor({ gpus: 16, nodes: 2, sharding: "hybrid" }, "weights"); // 8
 * shardFactor({ gpus: 8, sharding: "zero1" }, "gradients"); // 1
 * ```
 */
export function shardFactor(setup: ParallelSetup, state: "weights" | "gradients" | "optimizer"): number {
  if (setup.gpus <= 1) return 1;
  const level = isFsdp(setup.sharding) ? 3 : zeroStage(setup.sharding);
  const needs = { optimizer: 1, gradients: 2, weights: 3 }[state];
  if (level < needs) return 1;
  return setup.sharding === "hybrid" ? gpusPerNode(setup) : setup.gpus;
}

// Defaults of the engines' communication buffers, each from the installed engine's source:
/** DDP's bucket cap: `_DEFAULT_BUCKET_CAP_MB = 25` (torch/nn/parallel/distributed.py, torch 2.13); the buckets together hold every gradient, so the cap sets their number, not their sum. */
export const DDP_BUCKET_CAP_MB = 25;
/** ZeRO's `reduce_bucket_size` default, in elements: `Field(pp_int(5e8))` (deepspeed/runtime/zero/config.py, DeepSpeed 0.19.8). */
export const ZERO_REDUCE_BUCKET_ELEMS = 5e8;
/**
 * ZeRO's `allgather_bucket_size` default, in elements: `Field(pp_int(5e8))` (zero/config.py, DeepSpeed 0.19.8).
 * It allocates nothing where `all_gather_into_tensor` exists (every NCCL PyTorch ≥ 1.13): `all_gather_dp_groups`
 * (deepspeed/runtime/utils.py) then gathers into the flat 16-bit parameters in place; so no buffer is planned for it.
 */
export const ZERO_ALLGATHER_BUCKET_ELEMS = 5e8;
/** ZeRO-3's `stage3_prefetch_bucket_size` default, in elements: `Field(pp_int(5e7))` (zero/config.py, DeepSpeed 0.19.8). */
export const ZERO3_PREFETCH_BUCKET_ELEMS = 5e7;
/** DeepSpeed's estimators' `additional_buffer_factor=1.5` on host RAM (estimate_zero{2,3}_model_states_mem_needs, DeepSpeed 0.19.8): pinned staging buffers. */
export const DEEPSPEED_HOST_BUFFER_FACTOR = 1.5;

/**
 * Bytes of the engine's communication buffers on one GPU, apart from the gathered parameters of
 * FSDP (which {@link memoryAt} counts with them):
 * - DDP (`ddp`, or `none` on several GPUs): its gradient buckets (`gradient_as_bucket_view=False`
 *   by default) are a second copy of every trainable gradient, in buckets of {@link DDP_BUCKET_CAP_MB} MiB;
 * - ZeRO-1/2: one reduce bucket of `reduce_bucket_size` elements in the 16-bit gradient dtype
 *   (`contiguous_gradients` defaults true, `overlap_comm` false below stage 3: one buffer,
 *   `setup_buckets` in zero/stage_1_and_2.py allocates it whole, whatever the model's size);
 * - ZeRO-3: that reduce bucket (zero/stage3.py allocates it whole) plus the parameters prefetched
 *   ahead, up to `stage3_prefetch_bucket_size` elements (partitioned_param_coordinator.py).
 * Nothing on one GPU without ZeRO, so a single-GPU plan is unchanged.
 *
 * @example
 * ```ts
 * engineBuffers({ gpus: 8, sharding: "zero2" }, { total: 1e9, trainable: 1e9 }, { gradient: 2, weight: 4 }); // 1e9
 * ```
 */
export function engineBuffers(setup: ParallelSetup, params: { total: number; trainable: number }, elementBytes: { gradient: number; weight: number }): number {
  const stage = zeroStage(setup.sharding);
  if (stage === 1 || stage === 2) return ZERO_REDUCE_BUCKET_ELEMS * elementBytes.gradient;
  if (stage === 3) return (ZERO_REDUCE_BUCKET_ELEMS + Math.min(ZERO3_PREFETCH_BUCKET_ELEMS, params.total)) * elementBytes.gradient;
  if (setup.gpus > 1 && (setup.sharding === "ddp" || setup.sharding === "none")) return params.trainable * elementBytes.weight;
  return 0;
}

/**
 * Host RAM one node needs for what its ranks offload. FSDP: the offloaded shards of the node's
 * ranks. ZeRO (as DeepSpeed's estimators count it): × {@link DEEPSPEED_HOST_BUFFER_FACTOR}, and
 * under ZeRO-1/2 at least the fp32 model every local rank builds on the host before DeepSpeed
 * partitions it (4 bytes × parameters × ranks per node); ZeRO-3 is taken with `zero.Init`, which
 * builds the model partitioned (DeepSpeed's estimator default, `zero_init=True`).
 *
 * @example
 * ```ts
 * hostBytesPerNode({ gpus: 8, sharding: "zero2", offload: "optimizer" }, 2e9, 1e9); // 1.5 × max(8 × 2e9, 4 × 1e9 × 8)
 * ```
 */
export function hostBytesPerNode(setup: ParallelSetup, perRank: number, totalParams: number): number {
  if (perRank === 0) return 0;
  const local = gpusPerNode(setup);
  const states = perRank * local;
  const stage = zeroStage(setup.sharding);
  if (stage === 0) return Math.ceil(states);
  const load = stage === 3 ? 0 : 4 * totalParams * local;
  return Math.ceil(DEEPSPEED_HOST_BUFFER_FACTOR * Math.max(states, load));
}

/** The parallel setup a plan asks for, checked. */
export interface ResolvedParallel extends Required<ParallelSetup> {
  notes: string[];
}

/**
 * Checks and completes the parallel part of a plan's options: `gpus` per node × `nodes` ranks, the
 * sharding (ddp on several GPUs, none on one), the offload (none). Bad combinations throw an
 * {@link InputError} naming the flag.
 *
 * @example
 * ```ts
 * resolveParallel({ gpus: 8, nodes: 2, sharding: "hybrid" }); // { gpus: 16, nodes: 2, sharding: "hybrid", offload: "none", notes: [] }
 * ```
 */
export function resolveParallel(options: {
  gpus?: number | undefined;
  nodes?: number | undefined;
  sharding?: Sharding | undefined;
  offload?: Offload | undefined;
}): ResolvedParallel {
  const perNode = options.gpus ?? 1;
  if (!Number.isInteger(perNode) || perNode < 1) throw new InputError(`must be a positive integer, got ${perNode}`, { field: "--gpus" });
  const nodes = options.nodes ?? 1;
  if (!Number.isInteger(nodes) || nodes < 1) throw new InputError(`must be a positive integer, got ${nodes}`, { field: "--nodes" });
  const gpus = perNode * nodes;
  const sharding: Sharding = options.sharding ?? (gpus > 1 ? "ddp" : "none");
  const offload: Offload = options.offload ?? "none";
  const notes: string[] = [];
  const replicated = sharding === "none" || sharding === "ddp";
  if (offload !== "none") {
    if (replicated)
      throw new InputError(
        `${sharding} keeps every state on the GPU; CPU offload needs zero1, zero2 or zero3 (DeepSpeed ZeRO-Offload), or fsdp, shard-grad-op or hybrid (FSDP CPUOffload)`,
        { field: "--offload" },
      );
    if (offload === "params" && (sharding === "zero1" || sharding === "zero2"))
      throw new InputError(`${sharding} keeps the 16-bit parameters on every GPU; parameter offload needs zero3 or FSDP (or use --offload optimizer)`, {
        field: "--offload",
      });
    if (offload === "optimizer" && isFsdp(sharding))
      throw new InputError(
        "FSDP offloads parameters, gradients and optimizer state together (CPUOffload(offload_params=True), FSDP2's CPUOffloadPolicy); use --offload params",
        { field: "--offload" },
      );
  }
  // ZeRO-Offload on one GPU is a real setup (DeepSpeed runs ZeRO at world size 1); sharding alone is not
  if (gpus === 1 && !replicated && offload === "none") {
    throw new InputError(`${sharding} shards states over several GPUs; add --gpus N`, { field: "--sharding" });
  }
  if (sharding === "hybrid" && nodes === 1) notes.push("hybrid on one node shards over its GPUs and replicates nothing: it plans as fsdp (FULL_SHARD)");
  return { gpus, nodes, sharding, offload, notes };
}
