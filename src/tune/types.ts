/**
 * The types every part of the tuner shares: knobs, what a trial measured, the tune space, the
 * search's options and outcome. No code, so that the search, its strategies and the trial runner
 * import them without importing each other.
 *
 * @example
 * ```ts
 * import type { Knobs, TrialResult } from "./types.ts";
 * const knobs: Knobs = { batch_size: 64, precision: "bf16-mixed" };
 * ```
 * @module
 */

import type { KnobValue, Knobs } from "../knobs/index.ts";

export type { KnobValue, Knobs } from "../knobs/index.ts";
/** How a trial ended (the job runner's classification). */
export type TrialEnd = "ok" | "gpu_oom" | "host_oom" | "cap_exceeded" | "crashed" | "hung" | "interrupted" | "gpu_fault" | "no_steps" | "time_limit" | "slower";

/** Why a trial did not give a throughput, in the words the search and the user need. */
export interface TrialFailure {
  /** memory: out of memory or an SDK split; cap: over brim's cap; crash: the job failed for another reason; data: a batch larger than the data the loader sees; time_limit: slow, not a failure of memory; hung: no step for a long time; slower: stopped early, clearly slower than the best */
  kind: "memory" | "cap" | "crash" | "data" | "time_limit" | "hung" | "slower" | "interrupted" | "no_steps" | "gpu_fault";
  /** one line: the error the job printed, or what brim saw */
  cause: string;
}

/** What one trial measured. */
export interface TrialResult {
  end: TrialEnd;
  /** steady-state throughput from SDK step reports (null when no steady steps) */
  samplesPerSecond: number | null;
  /** durations of the steady steps (wait + compute), for noise estimates */
  stepSeconds: number[];
  /** peak of the capped memory (GPU of the process tree, or RSS of the tree in CPU mode) */
  peakBytes: number | null;
  /** the framework's own peak (SDK mem.peak), when known */
  frameworkPeakBytes: number | null;
  /** wall time the trial took */
  durationS: number;
  /** the SDK split the batch this many times (the knob value did not fit as given) */
  oomRecoveries: number;
  /** mean GPU utilization over the steady steps, when measured (for the record; the search does not use it) */
  gpuUtilMean?: number | null;
  /** share of step time waiting for data, when measured */
  dataWaitShare?: number | null;
  /** mean SM activity over the steady steps, when measured */
  smActivityMean?: number | null;
  /** samplesPerSecond is an upper bound (a trial stopped as slower while a step was still running), not a measured rate */
  rateIsBound?: boolean;
  /** what samplesPerSecond counts when no step said its samples: batches or steps a second (absent: samples) */
  rateUnit?: "batches" | "steps";
  /** "job": no step said its samples and samplesPerSecond is the job's own printed samples/s over the steps brim counted (tune/job-rate.ts) */
  rateFrom?: "job";
  /** the job's evaluation in this trial, as the attach saw its loaders (tune/evaluation.ts); absent or null without evidence of one */
  evaluation?: { ran: boolean; where: string | null } | null;
  /** why it gave no throughput (null when it did) */
  failure?: TrialFailure | null;
  /** the last lines of the job's output, kept when the trial failed */
  tail?: string[];
  /** seconds from the start of the process to its first step (start-up, imports, device and data set-up) */
  fixedCostS?: number | null;
  /** seconds of steady steps measured */
  measuredS?: number | null;
  /** why the measurement ended (stable, window, steps, slower) or null when the job ended by itself */
  stoppedBy?: string | null;
  /** median samples the job reported per steady step */
  samplesPerStep?: number | null;
  /** the most samples in one steady step: the batch the job runs, where an epoch's last, partial batch takes turns with it */
  samplesPerStepMax?: number | null;
  /** steps left out as warm-up */
  warmupSteps?: number;
  /** seconds the first step took (warm-up included) */
  firstStepS?: number | null;
  /** the precision the job reported running, when it said */
  precision?: string | null;
  /** the job reported no sample count: samples are the batch_size knob × the batches of each step */
  samplesFromKnob?: boolean;
  /** mean CPU of the job's process tree, in cores (1 = one core busy), and the machine's cores */
  cpuCores?: number | null;
  cpus?: number | null;
  /** mean share of the whole machine's CPU in use, 0..1 */
  hostBusy?: number | null;
  /** batches per optimizer step the job reported (median over the steady steps), when it said */
  accumulation?: number | null;
  /** samples per batch the job reported (median over the steady steps), when it said */
  microBatch?: number | null;
  /** samples per step the model's input said beside the loader's (the attach's `model_samples`, read in a few of the first loader-fed steps; their median), when it said */
  modelSamplesPerStep?: number | null;
  /** its samples per step did not follow its micro-batch or accumulation, which differ from the baseline's (the finding): its samples/s cannot be compared with trial 0's, and it may not win */
  notComparable?: string;
}

/** Runs one trial of the job with the given knobs. */
export interface TrialRunner {
  run(knobs: Knobs, purpose: string): Promise<TrialResult>;
}

/** What may be tuned, starting from where. */
export interface TuneSpace {
  /** the user's current configuration = trial 0, always run first */
  baseline: Knobs;
  /** `values`: the only micro-batches to try (an explicit list); otherwise any integer in min..max */
  microBatch?: { knob: string; min?: number; max?: number; values?: number[] };
  accumulation?: { knob: string };
  /** micro × accumulation must equal this (micro then only takes divisors) */
  effectiveBatch?: number;
  /** batches per optimizer step the job runs by itself (reported by trial 0), when no accumulation knob sets it and it is > 1 */
  observedAccumulation?: number;
  /** the job derives its accumulation from this batch per optimizer step (a config's global_batch_size beside the micro-batch key): micro-batches keep to its divisors */
  jobBatch?: { value: number; from: string; ranks: number };
  /** precision, num_workers, pin_memory, persistent_workers, prefetch_factor, user knobs; in priority order */
  others: { knob: string; values: KnobValue[] }[];
}

/** Budgets, the cap, the clock, and what the plan predicted. */
export interface SearchOptions {
  /** never exceeded on purpose */
  capBytes: number;
  maxTrials: number;
  maxTimeS: number;
  /** seconds, injected clock */
  now(): number;
  /** the longest step a trial can measure (its window): no upward probe is predicted to step longer */
  maxStepS?: number;
  /** from brim plan when available */
  prior?: { fixedBytes: number; bytesPerSample: number; maxMicroBatch?: number };
  /** asked before each trial: a reason to stop the search now (e.g. measurements that cannot be trusted) */
  stopWhen?(): StopReason | null;
  /** a note worth saying as it happens (every note is in the outcome's notes too) */
  onNote?(line: string): void;
  /** before and after each trial, for live progress */
  onTrial?(event: { index: number; knobs: Knobs; purpose: string; result?: TrialResult; bestIndex: number | null; plannedTotal: number }): void;
}

/** One trial of a search. */
export interface SearchTrial {
  index: number;
  knobs: Knobs;
  purpose: string;
  result: TrialResult;
  /** the peak the search expected when it chose the trial (memory line, or a worst-case bound); null when it had no expectation */
  predictedPeakBytes?: number | null;
}

/** Why a search ended. */
export type StopReason = "converged" | "max_trials" | "max_time" | "interrupted" | "untrusted";

/** The memory line of the winner's configuration. */
export interface MemoryLineReport {
  interceptBytes: number;
  bytesPerSample: number;
  marginBytes: number;
  /** largest micro-batch with line + margin ≤ cap (at most the knob's max) */
  predictedMaxMicroBatch: number;
  /** trials the line rests on */
  points: number;
  /** residual standard deviation of the fit; null with two trials */
  residualSigmaBytes: number | null;
}

/** What a search found. */
export interface SearchOutcome {
  trials: SearchTrial[];
  bestIndex: number | null;
  stopReason: StopReason;
  memoryLine: MemoryLineReport | null;
  /** human-readable reasoning */
  notes: string[];
  /** the winner's configuration with its mean throughput over all its trials */
  best: { knobs: Knobs; samplesPerSecond: number; measurements: number } | null;
  /** relative noise of one trial's throughput, as the search estimated it */
  noise: number;
  /** the knobs the search dropped (the micro-batch and its accumulation) after `trial` came back not comparable, and why */
  dropped?: { knobs: string[]; trial: number; reason: string };
}

/** How the failure of a job that ended on its own before two steady steps begins (all its steps had their samples). */
export const ENDED_TOO_SOON = "the job ended on its own";
/** How the failure of a trial that ran no training step at all begins (no optimizer step counted, nor an SDK or progress step). */
export const NO_TRAINING_STEP = "no training step: the job ran no optimizer step brim could count";
