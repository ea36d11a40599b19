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
/** A configuration: knob name → value. */
export type Knobs = Record<string, KnobValue>;

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
 * machine's cores busy (and is not tried when none do); `rollout` gains with the share of the time
 * measured that a reinforcement-learning job spends collecting its rollout (stepping its
 * environments: the steps far above the median step, each rollout landing in the update after it),
 * and is not tried when a rollout was measured and took hardly any of it. A knob with no rule is
 * tried after those the evidence favours.
 */
export type EvidenceRule =
  | { kind: "data-wait"; gain: (wait: number, workers: number) => number; whenFed?: "keep" }
  | { kind: "precision" }
  | { kind: "cpu-contention" }
  | { kind: "rollout"; gain: (share: number) => number };

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
  /** the precision fp32 matmuls compute in at a value of it (loss parity's tolerance, tune/parity.ts); absent: the job's own */
  computesIn?: (value: KnobValue) => string | undefined;
  /**
   * A change of it is matched by the inverse change of knob `knob` when the job has both, so that their
   * product (`what`) is kept: `num_envs` × `rollout_steps`, the transitions each update sees. A value
   * for which the other would not be a whole number is not tried.
   */
  holds?: { knob: string; what: string };
  /**
   * the updates from one rollout to the next grow in proportion to it: a value whose rollout would come
   * less often than once in the steps a trial measures is not tried (tune/rollout.ts), since a trial
   * with no rollout in it reads as fast
   */
  periodGrows?: true;
  /** its keys and flags name it only in a job that has this knob too (`num_steps` is a rollout's length only beside a number of environments) */
  foundWith?: string;
  /** what a new value changes in the training beside its speed, said with its trials (issue 37: a winner that trains the same model) */
  alters?: string;
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

/**
 * The powers of two from a quarter to four times `current`, with `current` among them, ascending: the
 * values a knob counted in environments, rollout steps or minibatches is walked over (up from the
 * job's value, then down). None for a value that is not a positive whole number.
 *
 * @example
 * ```ts
 * nearPowers(4); // [1, 2, 4, 8, 16]
 * nearPowers(6); // [2, 4, 6, 8, 16]
 * ```
 */
export function nearPowers(current: KnobValue | undefined): KnobValue[] {
  if (typeof current !== "number" || !Number.isInteger(current) || current < 1) return [];
  const powers = Array.from({ length: 24 }, (_, i) => 2 ** i).filter((n) => n >= current / 4 && n <= current * 4);
  return withCurrent(current, powers).sort((a, b) => Number(a) - Number(b));
}

/** The knob that is a reinforcement-learning job's number of environments stepped together. */
export const ENVS_KNOB = "num_envs";
/** The knob that is the steps each environment takes per rollout. */
export const ROLLOUT_KNOB = "rollout_steps";

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
    configKeys: ["accumulate_grad_batches", "gradient_accumulation_steps", "accumulation", "grad_accum_steps", "gradient_accumulate_every"],
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
  {
    // torch.set_float32_matmul_precision: "high" runs the fp32 matmuls of any job on TF32 tensor cores
    // (Ampere and newer: several times the fp32 rate, products with a 10-bit mantissa); PyTorch's
    // default is "highest". Any torch job has it without a key: the attach sets a trial's value at
    // import and reports the job's own (python/brim/_attach.py, MATMUL_PRECISION).
    name: "matmul_precision",
    configKeys: ["matmul_precision", "float32_matmul_precision"],
    type: "text",
    candidates: (current, context) => (context.bf16 ? onGpu(context, withCurrent(current, ["highest", "high"])) : []),
    jobWide: { howToSet: (value) => `torch.set_float32_matmul_precision("${String(value)}") at the job's start` },
    computesIn: (value) => (value === "highest" ? undefined : "tf32"),
  },
  {
    // Reinforcement learning (PPO over vectorised environments): the environments stepped together.
    // SB3's SubprocVecEnv and Gymnasium's AsyncVectorEnv run one process each, like loader workers;
    // in-process ones (DummyVecEnv, an environment written in torch) step them as one batch. Either way
    // a rollout of a fixed size takes fewer, wider steps with more of them. A new value changes the
    // samples each update sees unless the rollout length changes inversely, which the tune does when
    // the job has both (`holds`); the samples per optimizer step (the minibatch) stay as they are.
    name: ENVS_KNOB,
    configKeys: [ENVS_KNOB, "n_envs", "num_envs_per_worker", "num_environments"],
    type: "integer",
    candidates: nearPowers,
    evidence: { kind: "rollout", gain: (share) => share },
    holds: { knob: ROLLOUT_KNOB, what: "the rollout: transitions each update sees" },
    periodGrows: true,
    alters:
      "with rollout_steps changed inversely the rollout (transitions each update sees) is kept, and only its shape changes (more environments, shorter rollouts: fewer steps to bootstrap the returns over); without a rollout_steps knob the rollout grows or shrinks with it",
  },
  {
    // the steps each environment takes per rollout (SB3's and rl_zoo3's n_steps, CleanRL's num_steps):
    // longer rollouts spread the per-rollout costs (the switch between collecting and updating, the
    // returns' computation, logging) over more transitions, and change what each update sees
    name: ROLLOUT_KNOB,
    configKeys: [ROLLOUT_KNOB, "n_steps", "num_steps", "rollout_length", "n_rollout_steps", "nsteps"],
    type: "integer",
    candidates: nearPowers,
    evidence: { kind: "rollout", gain: (share) => 0.2 * share },
    foundWith: ENVS_KNOB,
    periodGrows: true,
    alters: "the rollout (num_envs × rollout_steps transitions each update sees) changes with it, and so does how stale the policy that collected them is",
  },
  {
    // the minibatches each pass over a rollout is cut into (CleanRL's num_minibatches, baselines'
    // nminibatches): the minibatch is the rollout divided by it, so more of them are smaller batches
    name: "num_minibatches",
    configKeys: ["num_minibatches", "n_minibatches", "nminibatches"],
    type: "integer",
    candidates: nearPowers,
    periodGrows: true,
    alters: "the minibatch (samples per optimizer step) is the rollout divided by it: more minibatches, more and smaller updates per pass",
  },
];
