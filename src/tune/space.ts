/**
 * The search space of a tune: which knobs are tuned, over which values, under which effective-batch
 * policy, and what the machine allows (the cap, tensor cores, CPUs for loader workers).
 *
 * @example
 * ```ts
 * const space = buildSpace({ batch_size: 4, accumulation: 16 }, {}, ["batch_size", "accumulation"], context, console.log);
 * space.effectiveBatch; // 64: held, as the configuration has it
 * ```
 * @module
 */
import type { Devices } from "../devices/index.ts";
import { gpuCapabilities } from "../devices/gpu-facts.ts";
import { UsageError } from "../errors/index.ts";
import { findGpu } from "../plan/catalog.ts";
import { formatBytes } from "../bytes.ts";
import { ACCUMULATION_KNOB, candidateValues, knobSpec, MICRO_BATCH_KNOB, NEED_WORKERS, spelledValues, type CandidateContext } from "../knobs/index.ts";
import { rankByEvidence, type TrialEvidence } from "./evidence.ts";
import { dividingMicroBatches, keptBatchLine, type GlobalBatch } from "./divisible.ts";
import type { Knobs, KnobValue, TuneSpace } from "./types.ts";

export { ACCUMULATION_KNOB, MICRO_BATCH_KNOB } from "../knobs/index.ts";

/** What {@link buildSpace} is told by the user. */
export interface SpaceOptions {
  effectiveBatch?: number;
  freeBatch?: boolean;
  knobValues?: Record<string, KnobValue[]>;
  fixed?: string[];
  maxMicroBatch?: number;
  /** precision reaches the job on its command line (--bf16, --dtype=bfloat16, --mixed_precision bf16): only the values a switch or spelling says (fp32, fp16-mixed, bf16-mixed) */
  precisionSwitch?: boolean;
  /** batches per optimizer step trial 0 reported (the attach counts them): the accumulation in force when no knob sets it */
  observedAccumulation?: number;
  /** the global batch the job derives its accumulation from (tune/divisible.ts), over `ranks` ranks */
  jobBatch?: GlobalBatch & { ranks: number };
}

/** The effective-batch policy in force, for the record and the final table. */
export interface EffectiveBatchPolicy {
  /** "held": micro × accumulation stays at `value`; "free": it changes with the micro-batch; "none": no micro-batch knob */
  kind: "held" | "free" | "none";
  value: number | null;
  /** one line for people */
  text: string;
}

/**
 * The candidate context (tensor cores, bf16, CPUs) of the first GPU, from the one source of GPU facts.
 *
 * @example
 * ```ts
 * candidateContext({ backend: "nvml", gpus: [{ name: "NVIDIA H100 80GB HBM3", computeCapability: "9.0" }], cpus: 16 });
 * // { backend: "nvml", bf16: true, tensorCores: true, cpus: 16 }
 * ```
 */
export function candidateContext(inventory: {
  backend: CandidateContext["backend"];
  gpus: { name: string; computeCapability: string | null }[];
  cpus: number;
}): CandidateContext {
  const gpu = inventory.gpus[0];
  const facts =
    gpu === undefined
      ? null
      : gpuCapabilities({ name: gpu.name, computeCapability: gpu.computeCapability, knownArchitecture: findGpu(gpu.name)?.architecture ?? null });
  return { backend: inventory.backend, bf16: facts?.bf16 === true, tensorCores: facts?.tensorCores === true, cpus: inventory.cpus };
}

/**
 * {@link candidateContext} of the devices brim sees.
 *
 * @example
 * ```ts
 * contextOfDevices(openDevices()).tensorCores;
 * ```
 */
export function contextOfDevices(devices: Devices): CandidateContext {
  const inventory = devices.inventory();
  return candidateContext({
    backend: inventory.backend,
    gpus: inventory.gpus.map((gpu) => ({ name: gpu.name, computeCapability: gpu.computeCapability })),
    cpus: inventory.host.cpus,
  });
}

/**
 * The default memory cap: 90 % of the first GPU, or half the RAM in CPU mode.
 *
 * @example
 * ```ts
 * defaultCap(devices); // { capBytes: 7.2e10, scope: "gpu", why: "90% of NVIDIA H100 80GB HBM3's memory (set --cap to change)" }
 * ```
 */
export function defaultCap(devices: Devices): { capBytes: number; scope: "gpu" | "ram"; why: string } {
  const inventory = devices.inventory();
  const gpu = inventory.gpus[0];
  if (inventory.backend !== "cpu" && gpu !== undefined) {
    return { capBytes: Math.floor(gpu.totalBytes * 0.9), scope: "gpu", why: `90% of ${gpu.name}'s memory (set --cap to change)` };
  }
  return {
    capBytes: Math.floor(inventory.host.memTotalBytes * 0.5),
    scope: "ram",
    why: `half of this machine's RAM (${formatBytes(inventory.host.memTotalBytes)}), CPU mode (set --cap to change)`,
  };
}

/**
 * The search space from the baseline and what the job has: the micro-batch and accumulation knobs,
 * the effective batch to hold, and candidate values for the rest. An explicit `--knob batch_size=a,b,c`
 * list is the micro-batch's only values.
 *
 * @example
 * ```ts
 * buildSpace({ batch_size: 4, accumulation: 16, num_workers: 0 }, {}, ["batch_size", "accumulation", "num_workers"], context, console.log);
 * // { microBatch: { knob: "batch_size" }, accumulation: { knob: "accumulation" }, effectiveBatch: 64, others: [...] }
 * ```
 */
export function buildSpace(
  baseline: Knobs,
  options: SpaceOptions,
  known: readonly string[],
  context: CandidateContext,
  note: (line: string) => void,
): TuneSpace {
  const fixed = new Set(options.fixed ?? []);
  const has = (knob: string): boolean => known.includes(knob) && baseline[knob] !== undefined && !fixed.has(knob);
  const space: TuneSpace = { baseline, others: [] };
  const listed = explicitMicroBatches(options.knobValues);
  if (has(MICRO_BATCH_KNOB)) {
    space.microBatch = {
      knob: MICRO_BATCH_KNOB,
      min: 1,
      ...(options.maxMicroBatch !== undefined ? { max: options.maxMicroBatch } : {}),
      ...(listed !== null ? { values: listed } : {}),
    };
    if (listed !== null) note(`micro-batch: exactly the listed values ${listed.join(", ")} (--knob ${MICRO_BATCH_KNOB})`);
    else if (options.jobBatch !== undefined && options.effectiveBatch === undefined) keepToDivisors(space, options.jobBatch, options.maxMicroBatch, note);
  } else note("the job has no batch_size knob (no config key found, not read through brim.knob): the micro-batch is not tuned");
  if (has(ACCUMULATION_KNOB)) space.accumulation = { knob: ACCUMULATION_KNOB };
  const micro = baseline[MICRO_BATCH_KNOB];
  const accumulation = baseline[ACCUMULATION_KNOB];
  if (options.effectiveBatch !== undefined) {
    if (space.accumulation === undefined)
      throw new UsageError("--effective-batch needs an accumulation knob (a config key like accumulate_grad_batches, or brim.knob('accumulation'))");
    space.effectiveBatch = options.effectiveBatch;
  } else if (!options.freeBatch && space.accumulation !== undefined && typeof micro === "number" && typeof accumulation === "number" && accumulation > 1) {
    space.effectiveBatch = micro * accumulation;
  }
  if (options.observedAccumulation !== undefined && options.observedAccumulation > 1) space.observedAccumulation = options.observedAccumulation;
  note(effectiveBatchPolicy(space, options).text);
  const workers = baseline.num_workers;
  const tunable = known.filter((knob) => !fixed.has(knob) && (!NEED_WORKERS.has(knob) || (typeof workers === "number" && workers > 0)));
  const candidates = candidateValues(tunable, baseline, context);
  const userLists = Object.entries(options.knobValues ?? {}).filter(([knob, values]) => values.length > 1 && knob !== MICRO_BATCH_KNOB && !fixed.has(knob));
  space.others = [
    ...userLists.map(([knob, values]) => ({ knob, values })),
    ...candidates.filter((candidate) => !userLists.some(([knob]) => knob === candidate.knob)),
  ]
    .map((entry) =>
      entry.knob === "precision" && options.precisionSwitch === true
        ? { ...entry, values: entry.values.filter((v) => spelledValues(entry.knob).has(v)) }
        : entry,
    )
    .filter((entry) => entry.values.length > 1);
  return space;
}

/**
 * The effective-batch policy a space puts in force.
 *
 * @example
 * ```ts
 * effectiveBatchPolicy({ baseline: { batch_size: 8, accumulation: 8 }, microBatch: { knob: "batch_size" }, effectiveBatch: 64, others: [] }, {}).text;
 * // "effective batch held at 64 = 8 × 8, as your configuration has it: ..."
 * ```
 */
export function effectiveBatchPolicy(space: TuneSpace, options: Pick<SpaceOptions, "effectiveBatch">): EffectiveBatchPolicy {
  const micro = space.baseline[MICRO_BATCH_KNOB];
  const accumulation = space.baseline[ACCUMULATION_KNOB] ?? space.observedAccumulation ?? 1;
  if (space.microBatch === undefined) return { kind: "none", value: null, text: "effective batch: not touched (no micro-batch knob)" };
  if (space.jobBatch !== undefined)
    return {
      kind: "held",
      value: space.jobBatch.value,
      text: `effective batch held at ${space.jobBatch.value} by the job itself (${space.jobBatch.from}): it derives its accumulation from it, so the optimisation maths stay the same`,
    };
  if (space.effectiveBatch !== undefined) {
    const why =
      options.effectiveBatch !== undefined
        ? "--effective-batch"
        : `as your configuration has it (${String(micro)} × ${String(accumulation)}; --free-batch lets it change)`;
    return {
      kind: "held",
      value: space.effectiveBatch,
      text: `effective batch held at ${space.effectiveBatch} (micro-batch × accumulation), ${why}: the optimisation maths stay the same`,
    };
  }
  const before = typeof micro === "number" && typeof accumulation === "number" ? micro * accumulation : null;
  const inCode = space.accumulation === undefined && space.observedAccumulation !== undefined;
  return {
    kind: "free",
    value: before,
    text: inCode
      ? `effective batch free: the job accumulates ${space.observedAccumulation} batches per optimizer step in its code (no knob brim can change), so the effective batch (now ${String(before)} = ${String(micro)} × ${space.observedAccumulation}) changes with the micro-batch, and so may the learning rate that suits it`
      : `effective batch free: it changes with the micro-batch${before === null ? "" : ` (now ${before})`}, and so may the learning rate that suits it (give --effective-batch N to hold it)`,
  };
}

/**
 * When the only knobs of a space with no micro-batch are job-wide ones (every PyTorch job has them,
 * `cpu_threads`) and trial 0's evidence rules each out, the lines that say why: the job has nothing to
 * tune. Null when something is left to try.
 *
 * @example
 * ```ts
 * jobWideRuledOut({ baseline: { cpu_threads: 2 }, others: [{ knob: "cpu_threads", values: [1, 2] }] }, quietEvidence);
 * // ["cpu_threads not tried: other processes keep only 0.02 of 2 cores busy: fewer threads pay only when they hold cores"]
 * ```
 */
export function jobWideRuledOut(space: TuneSpace, evidence: TrialEvidence): string[] | null {
  if (space.microBatch !== undefined || space.others.some((other) => knobSpec(other.knob)?.jobWide === undefined)) return null;
  const { ranked, skipped } = rankByEvidence(space.others, evidence, space.baseline);
  return ranked.length > 0 ? null : skipped.map((s) => `${s.knob} not tried: ${s.why}`);
}

/** A job that derives its accumulation from a global batch: only micro-batches that divide it per rank are tried (a value that does not crashes the trial or changes the batch). */
function keepToDivisors(space: TuneSpace, global: GlobalBatch & { ranks: number }, max: number | undefined, note: (line: string) => void): void {
  const values = dividingMicroBatches(global.value, global.ranks, { min: 1, ...(max !== undefined ? { max } : {}) });
  const micro = space.baseline[MICRO_BATCH_KNOB];
  if (values.length === 0 || typeof micro !== "number" || !values.includes(micro)) {
    note(
      `${global.from} = ${global.value} is not a whole number of micro-batches of ${String(micro)} per rank: the micro-batch is searched as if it were free`,
    );
    return;
  }
  if (space.microBatch !== undefined) space.microBatch.values = values;
  space.jobBatch = { value: global.value, from: global.from, ranks: global.ranks };
  note(keptBatchLine(global, global.ranks, values));
}

/** The micro-batches of `--knob batch_size=a,b,c` (two or more positive integers), ascending; null without such a list. */
function explicitMicroBatches(knobValues: Record<string, KnobValue[]> | undefined): number[] | null {
  const values = knobValues?.[MICRO_BATCH_KNOB];
  if (values === undefined || values.length < 2) return null;
  const numbers = values.map((value) => (typeof value === "number" ? value : Number(value)));
  const bad = numbers.find((n) => !Number.isInteger(n) || n < 1);
  if (bad !== undefined) throw new UsageError(`--knob ${MICRO_BATCH_KNOB}: values must be positive integers, got ${String(bad)}`);
  return [...new Set(numbers)].sort((a, b) => a - b);
}
