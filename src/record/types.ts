/** How a job ended (docs/run-store.md). */
export type EndCause = "ok" | "gpu_oom" | "host_oom" | "gpu_fault" | "hung" | "crashed" | "interrupted" | "cap_exceeded" | "store_failed" | "supervisor_lost";

/** The end of a run as run.json records it. */
export interface RunEnd {
  cause: EndCause;
  exit_code: number | null;
  signal: string | null;
  message: string;
}

/** Numbers brim measured over a run; `null` where it could not measure, never 0. */
export interface RunSummary {
  duration_s: number;
  steps: number;
  steady_steps: number;
  samples: number;
  samples_per_s: number | null;
  /** who measured the steps that throughput counts (docs/run-store.md); null without throughput, or in records older than this field */
  throughput_source: "sdk" | "attach" | "progress" | null;
  data_wait_share: number | null;
  step_time_s: number | null;
  peak_tree_gpu_bytes: number | null;
  peak_tree_rss_bytes: number | null;
  /** Peak Σ PSS of the process tree (what the RAM cap counts); absent in records from before it was measured. */
  peak_tree_pss_bytes?: number | null;
  framework_peak_allocated_bytes: number | null;
  framework_peak_reserved_bytes: number | null;
  gpu_util_mean: number | null;
  sm_activity_mean: number | null;
  power_mean_w: number | null;
  energy_j: number | null;
  energy_j_per_sample: number | null;
  oom_recoveries: number;
  micro_batch: number | null;
  accumulation: number | null;
}

/** Peaks the guard tracked over every reading (the timeline keeps only some of them). */
export interface LivePeaks {
  treeGpuBytes: number | null;
  treeRssBytes: number | null;
}

/** What the run store knows about the devices a run used. */
export interface RunDevice {
  backend: "nvml" | "nvidia-smi" | "cpu";
  driver: string | null;
  gpus: { index: number; name: string; uuid: string | null; total_bytes: number }[];
  host: { cpus: number; mem_total_bytes: number };
}

/** run.json (schema `brim.run/v1`). */
export interface RunMeta {
  schema: "brim.run/v1";
  id: string;
  kind: "run" | "trial";
  tune_id: string | null;
  command: string[];
  cwd: string;
  knobs: Record<string, number | string | boolean>;
  cap_bytes: number | null;
  cap_scope: "gpu" | "ram";
  step_budget: number | null;
  device: RunDevice;
  versions: Record<string, string>;
  started_at: string;
  ended_at: string | null;
  end: RunEnd | null;
  summary: RunSummary | null;
  /** Set by brim's watchdog when brim was lost and the job ran on unguarded (--keep-on-supervisor-loss). */
  unguarded_since?: string;
}

/** One line of timeline.ndjson: always `t` (Unix seconds) and `kind`; the rest depends on the kind. */
export interface TimelineEntry {
  t: number;
  kind: string;
  [field: string]: unknown;
}

/** One trial as tune.json records it. */
export interface TuneTrialRecord {
  index: number;
  run_id: string | null;
  knobs: Record<string, number | string | boolean>;
  purpose: string;
  end: string;
  samples_per_s: number | null;
  /** samples_per_s is an upper bound (stopped as slower while a step was still running), not a measured rate */
  samples_per_s_bound?: boolean;
  peak_bytes: number | null;
  framework_peak_bytes: number | null;
  gpu_util_mean: number | null;
  data_wait_share: number | null;
  duration_s: number;
  oom_recoveries: number;
  /** Why the trial gave no throughput: kind (memory, cap, crash, time_limit, hung, slower, ...) and the one-line cause. */
  failure?: { kind: string; cause: string } | null;
  /** The last lines of a failed trial's output. */
  tail?: string[];
  /** Seconds from the start of the process to its first step (start-up, imports, device and data set-up). */
  fixed_cost_s?: number | null;
  /** Seconds of steady steps measured, and why the measurement ended (stable, window, steps, slower). */
  measured_s?: number | null;
  stopped_by?: string | null;
  samples_per_step?: number | null;
  sm_activity_mean?: number | null;
  /** Batches per optimizer step the job reported, and the effective batch that ran (micro-batch × accumulation). */
  accumulation?: number | null;
  effective_batch?: number | null;
}

/** Where a knob reaches the job. */
export interface KnobBindingRecord {
  knob: string;
  via: "template" | "config" | "env" | "argv";
  file?: string;
  key?: string;
  file_sha256?: string;
  /** argv: the flag's (or override's) index in the command, how the value sits there, the flag, trial 0's value */
  index?: number;
  form?: "separate" | "equals" | "override" | "switch";
  flag?: string;
  value?: number | string | boolean;
}

/** tune.json (schema `brim.tune/v1`). */
export interface TuneRecord {
  schema: "brim.tune/v1";
  id: string;
  command: string[];
  cwd: string;
  bindings: KnobBindingRecord[];
  cap_bytes: number;
  cap_scope: "gpu" | "ram";
  effective_batch: number | null;
  started_at: string;
  ended_at: string | null;
  trials: TuneTrialRecord[];
  winner: { index: number; knobs: Record<string, number | string | boolean>; speedup: number | null } | null;
  stop_reason: string | null;
  /** Relative noise of one trial's throughput, as the search estimated it. */
  noise?: number;
  /** The search that ran: "brim", "doubling-bisection" or "grid". */
  strategy?: string;
  memory_line: { intercept_bytes: number; bytes_per_sample: number; margin_bytes: number; predicted_max_micro_batch: number } | null;
  notes: string[];
  /** The budget stated up front: trials and seconds at most. */
  budget?: { max_trials: number; max_time_s: number };
  /** The effective-batch policy in force ("held" / "free" / "none") and what the winner does to it. */
  effective_batch_policy?: { kind: string; before: number | null; after: number | null; text: string };
  /**
   * The winner and the baseline measured again, interleaved (A/B/A/B): the speedup (ratio of geometric
   * means) with its 95 % interval; "no_gain" when the interval holds 1.0 or nothing beat the baseline
   * (then there is no winner, and nothing to apply).
   */
  confirmation?: {
    verdict: "confirmed" | "no_gain";
    speedup: number | null;
    low: number | null;
    high: number | null;
    noise: number | null;
    df: number | null;
    baseline_rates: number[];
    winner_rates: number[];
  } | null;
  /** What still limits the job in the configuration the tune ends with (its closing lines). */
  limits?: string[];
  /** With no winner: why, and the next thing to try. */
  no_winner?: { reason: string; next: string } | null;
}
