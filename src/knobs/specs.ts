/**
 * Every knob brim knows, one entry each: the names it goes by in configs, on command lines and in a
 * job's knobs, what its values are, the values a tune tries and how the search treats it. A new knob
 * is one entry here (and, where the job must apply it, its twin in python/brim); every list the
 * tuner, the guard and the reports keep is derived from this table (`index.ts`).
 *
 * @example
 * ```ts
 * KNOB_SPECS.find((spec) => spec.name === "num_workers")?.configKeys; // ["num_workers", "dataloader_num_workers"]
 * ```
 * @module
 */

/** A knob's value as the job reads it. */
export type KnobValue = number | string | boolean;

/** What the tuner knows about the machine when it picks candidate values. */
export interface CandidateContext {
  backend: "nvml" | "nvidia-smi" | "cpu";
  /** Tensor cores with bf16 (Ampere and newer). */
  bf16: boolean;
  /** Tensor cores at all (Volta and newer). */
  tensorCores: boolean;
  cpus: number;
  /** what bounds the loader, from trial 0's evidence (tune/evidence.ts loaderBound): "io" lets workers go past the cores */
  loader?: "io" | "cpu" | null;
}

/**
 * What a trial's evidence says of a knob (tune/evidence.ts): `data-wait` knobs gain with the share of
 * step time the loop waits for data (`gain(wait, workers)`, `workers` the trial's loader workers), and
 * are not tried when the loop hardly waits unless `whenFed` keeps them; `precision` gains on a GPU
 * with tensor cores while the job runs 32-bit; `cpu-contention` gains when other processes keep the
 * machine's cores busy (and is not tried when none do). A knob with no rule is tried after those the
 * evidence favours.
 */
export type EvidenceRule =
  { kind: "data-wait"; gain: (wait: number, workers: number) => number; whenFed?: "keep" } | { kind: "precision" } | { kind: "cpu-contention" };

/** One knob. Only `name`, `configKeys` and `type` are needed; the rest says where it differs. */
export interface KnobSpec {
  /** brim's name: `--knob NAME=...`, `brim.knob("NAME", ...)`, the records' key */
  name: string;
  /** the last segment of the config keys it is usually found under, its name among them */
  configKeys: readonly string[];
  /** further names command-line flags and overrides use (normalised: no dashes, `-` as `_`, lower case) */
  flagNames?: readonly string[];
  /** one-letter flags with a settled meaning (`-b 256`) */
  shortFlags?: readonly string[];
  /** switches that set a value by being present (`--bf16`); absent means none of them */
  switches?: Readonly<Record<string, KnobValue>>;
  /** other spellings of its values on command lines, one map (brim's value → the spelling) per convention */
  spellings?: readonly Readonly<Record<string, string>>[];
  /** flag names whose value is this knob only when one of `spellings` names it (`--dtype int8` is not a precision) */
  spelledOnly?: readonly string[];
  /** other names a job or a tune's record may give the knob itself (python/brim/_samples.py reads the same) */
  knobNames?: readonly string[];
  type: "integer" | "boolean" | "text";
  /**
   * The values a tune tries, in the order the coordinate descent walks them, given the value the job
   * runs with; fewer than two: not tuned on this machine. The table's order is the order knobs are tried in.
   */
  candidates?: (current: KnobValue | undefined, context: CandidateContext) => KnobValue[];
  /** an argument of the DataLoader the attach can set (BRIM_LOADER_ARGS); `needsWorkers`: PyTorch takes it only with num_workers > 0 */
  loader?: { needsWorkers: boolean };
  /** its values are walked to the end before the micro-batch is looked at again */
  walkFirst?: true;
  /** a value of it decides the bytes of every memory term: each value gets a memory line of its own */
  ownMemoryLine?: true;
  evidence?: EvidenceRule;
  /**
   * A knob every job of a framework has without a key of its own: the attach sets it in a trial and
   * reports the job's value (python/brim names the same knob); `apply` says how to set it for good.
   */
  jobWide?: { howToSet: (value: KnobValue) => string };
}

/**
 * `values` with the job's `current` value first when it is not among them, without repeats.
 *
 * @example
 * ```ts
 * withCurrent(3, [0, 1, 2, 4]); // [3, 0, 1, 2, 4]
 * ```
 */
export function withCurrent(current: KnobValue | undefined, values: readonly KnobValue[]): KnobValue[] {
  return [...new Set(current !== undefined && !values.includes(current) ? [current, ...values] : values)];
}

/** The knob that is the micro-batch (samples per forward pass and rank): its search is the memory phase's (tune/strategies/micro-batch.ts). */
export const MICRO_BATCH_KNOB = "batch_size";
/** The knob that is the gradient accumulation (batches per optimizer step), searched with the micro-batch. */
export const ACCUMULATION_KNOB = "accumulation";

const onGpu = (context: CandidateContext, values: KnobValue[]): KnobValue[] => (context.backend === "cpu" ? [] : values);

/**
 * The knobs, in the order the coordinate descent tries those with candidates.
 *
 * @example
 * ```ts
 * KNOB_SPECS.map((spec) => spec.name); // ["batch_size", "accumulation", "precision", "num_workers", ...]
 * ```
 */
export const KNOB_SPECS: readonly KnobSpec[] = [
  {
    name: MICRO_BATCH_KNOB,
    configKeys: ["batch_size", "micro_batch_size", "per_device_train_batch_size", "train_batch_size"],
    flagNames: ["bs", "batch", "train_bs", "batchsize"],
    shortFlags: ["b"],
    knobNames: ["micro_batch", "micro_batch_size", "per_device_train_batch_size", "bs"],
    type: "integer",
  },
  {
    name: ACCUMULATION_KNOB,
    configKeys: ["accumulate_grad_batches", "gradient_accumulation_steps", "accumulation", "grad_accum_steps"],
    flagNames: ["grad_accum", "accum_steps", "accumulation_steps", "gradient_accumulation"],
    type: "integer",
  },
  {
    name: "precision",
    configKeys: ["precision", "mixed_precision"],
    flagNames: ["dtype"],
    // Hugging Face TrainingArguments and many scripts; nanoGPT's torch dtype names; accelerate's --mixed_precision
    switches: { bf16: "bf16-mixed", fp16: "fp16-mixed" },
    spellings: [
      { fp32: "float32", "bf16-mixed": "bfloat16", "fp16-mixed": "float16" },
      { fp32: "no", "bf16-mixed": "bf16", "fp16-mixed": "fp16" },
    ],
    spelledOnly: ["dtype"],
    type: "text",
    // least change first from fp32: tf32 keeps fp32's numbers and costs nothing per step; bf16 needs
    // no loss scaler; fp16 comes last. A walk stops at the first value clearly slower, so at a small,
    // launch-bound step the later ones are left for the retry at the micro-batch the memory phase picks.
    candidates: (current, context) =>
      onGpu(context, withCurrent(current, ["fp32", ...(context.bf16 ? ["tf32", "bf16-mixed"] : []), ...(context.tensorCores ? ["fp16-mixed"] : [])])),
    ownMemoryLine: true,
    evidence: { kind: "precision" },
  },
  {
    name: "num_workers",
    configKeys: ["num_workers", "dataloader_num_workers"],
    flagNames: ["workers", "n_workers", "loader_workers"],
    shortFlags: ["j"],
    type: "integer",
    // I/O-bound: workers wait on files, not on cores, so more than the cores can help; CPU-bound or unknown: up to the cores
    candidates: (current, context) => {
      const most = context.loader === "io" ? Math.max(16, 2 * context.cpus) : Math.max(1, context.cpus);
      return withCurrent(
        current,
        [0, 1, 2, 4, 8, 16, 32, 64].filter((n) => n <= most),
      );
    },
    loader: { needsWorkers: false },
    walkFirst: true,
    evidence: { kind: "data-wait", gain: (wait, workers) => (workers === 0 ? wait : wait * 0.5) },
  },
  {
    name: "pin_memory",
    configKeys: ["pin_memory", "dataloader_pin_memory"],
    type: "boolean",
    candidates: (current, context) => onGpu(context, withCurrent(current, [false, true])),
    loader: { needsWorkers: false },
    // pinning speeds the copy to the GPU, whether or not the loop waits for data
    evidence: { kind: "data-wait", gain: (wait) => 0.02 + wait * 0.1, whenFed: "keep" },
  },
  {
    name: "persistent_workers",
    configKeys: ["persistent_workers", "dataloader_persistent_workers"],
    type: "boolean",
    candidates: (current) => withCurrent(current, [false, true]),
    loader: { needsWorkers: true },
    evidence: { kind: "data-wait", gain: (wait) => wait * 0.3 },
  },
  {
    name: "prefetch_factor",
    configKeys: ["prefetch_factor", "dataloader_prefetch_factor"],
    type: "integer",
    candidates: (current) => [...new Set([...(current !== undefined ? [current] : []), 2, 4])],
    loader: { needsWorkers: true },
    walkFirst: true,
    evidence: { kind: "data-wait", gain: (wait) => wait * 0.3 },
  },
  {
    // PyTorch's intra-op threads in the training process (torch.set_num_threads; default: the physical
    // cores). Each parallel op waits at a barrier for all of them, so when other work holds a core
    // every op waits for it: beside one busy core of 2, the cnn-lstm example ran 7.6 samples/s with no
    // loader workers and 6.2 with 4 on 2 threads, 9.6 and 45 on 1 (bench/results/cpu-threads.json).
    // Fewer is tried, never more.
    name: "cpu_threads",
    configKeys: ["cpu_threads", "num_threads", "torch_num_threads", "intra_op_threads", "omp_num_threads"],
    flagNames: ["torch_threads", "intra_op_parallelism"],
    type: "integer",
    candidates: (current) => {
      if (typeof current !== "number" || current <= 1) return [];
      const fewer = [1, 2, 4, 8, 16, 32, 64].filter((n) => n < current);
      return withCurrent(current, fewer).sort((a, b) => Number(a) - Number(b));
    },
    evidence: { kind: "cpu-contention" },
    jobWide: { howToSet: (value) => `OMP_NUM_THREADS=${String(value)} in the job's environment (or torch.set_num_threads(${String(value)}) at its start)` },
  },
  {
    // torch.backends.cudnn.benchmark: cuDNN times its kernels for each new input shape and keeps the
    // fastest; it pays on fixed shapes (convolutions) and costs a slow first step per shape
    name: "cudnn_benchmark",
    configKeys: ["cudnn_benchmark"],
    type: "boolean",
    candidates: (current, context) => onGpu(context, withCurrent(current, [false, true])),
  },
];
