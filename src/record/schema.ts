/**
 * The one description of brim's records: run.json, a timeline line and tune.json, as zod schemas,
 * with the TypeScript types derived from them. On read a record is parsed, normalized (fields older
 * records lack get their documented default) and validated, so that the rest of brim works on
 * checked records. Fields this brim does not know (written by a newer brim of the same schema) are
 * kept, not dropped. A damaged record, or one whose schema is newer, is an error that names the
 * file and the field.
 *
 * @module
 */
import { z } from "zod";
import { BrimError } from "../errors/index.ts";

/** A record's type without the `[key: string]: unknown` a loose object adds, at every depth: its known fields only. */
type Known<T> = T extends readonly (infer U)[]
  ? Known<U>[]
  : T extends object
    ? { [K in keyof T as string extends K ? (unknown extends T[K] ? never : K) : K]: Known<T[K]> }
    : T;

const n = z.number();
const nn = z.number().nullable();
const knobs = z.record(z.string(), z.union([z.number(), z.string(), z.boolean()]));
/** `--name`: what the user calls a run or a tune (ids are timestamps); absent when not given. */
const recordName = z.string().optional();
/** `--tag key=value`, repeatable: what the user files a run or a tune under; absent when none. */
const recordTags = z.record(z.string(), z.string()).optional();

const endCauseSchema = z.enum(["ok", "gpu_oom", "host_oom", "gpu_fault", "hung", "crashed", "interrupted", "cap_exceeded", "store_failed", "supervisor_lost"]);

const runEndSchema = z.looseObject({
  cause: endCauseSchema,
  exit_code: nn,
  signal: z.string().nullable(),
  message: z.string(),
});

/** run.json's summary as written (docs/run-store.md "summary"). */
export const runSummarySchema = z.looseObject({
  duration_s: n,
  /** step reports, all processes */
  steps: n,
  steady_steps: n,
  /** Σ samples over every step report that `steps` counts (warm-up included); in records older than `steady_samples`, the steady ones only */
  samples: n,
  /** Σ samples over the steady steps that throughput counts; records older than this field held it in `samples` */
  steady_samples: n.optional(),
  samples_per_s: nn,
  /** who measured the steps that throughput counts (docs/run-store.md); null without throughput, or in records older than this field */
  throughput_source: z.enum(["sdk", "attach", "progress"]).nullable().default(null),
  data_wait_share: nn,
  step_time_s: nn,
  peak_tree_gpu_bytes: nn,
  peak_tree_rss_bytes: nn,
  /** Peak Σ PSS of the process tree (what the RAM cap counts); absent in records from before it was measured. */
  peak_tree_pss_bytes: nn.optional(),
  framework_peak_allocated_bytes: nn,
  framework_peak_reserved_bytes: nn,
  gpu_util_mean: nn,
  sm_activity_mean: nn.default(null),
  power_mean_w: nn.default(null),
  energy_j: nn.default(null),
  energy_j_per_sample: nn.default(null),
  oom_recoveries: n.default(0),
  micro_batch: nn,
  accumulation: nn,
  /** vector environments' steps a second over the steady steps (SB3/Gymnasium, the attach's env_steps); null for other jobs and older records */
  env_steps_per_s: nn.default(null),
});

/** The summary as read: `steady_samples` filled from `samples` in records older than it. */
const summarySchema = runSummarySchema.transform((s) => ({ ...s, steady_samples: s.steady_samples ?? s.samples }));

const runDeviceSchema = z.looseObject({
  backend: z.enum(["nvml", "nvidia-smi", "cpu"]),
  driver: z.string().nullable(),
  gpus: z.array(z.looseObject({ index: n, name: z.string(), uuid: z.string().nullable(), total_bytes: n })),
  host: z.looseObject({ cpus: n, mem_total_bytes: n }),
});

/** run.json (schema `brim.run/v1`), as written; docs/run-store.md names every field. */
export const runSchema = z.looseObject({
  schema: z.literal("brim.run/v1"),
  id: z.string(),
  kind: z.enum(["run", "trial"]),
  tune_id: z.string().nullable(),
  command: z.array(z.string()),
  cwd: z.string(),
  knobs,
  cap_bytes: nn,
  cap_scope: z.enum(["gpu", "ram"]),
  step_budget: nn,
  device: runDeviceSchema,
  versions: z.record(z.string(), z.string()).default({}),
  started_at: z.string(),
  ended_at: z.string().nullable(),
  end: runEndSchema.nullable(),
  summary: summarySchema.nullable(),
  name: recordName,
  tags: recordTags,
  /** Set by brim's watchdog when brim was lost and the job ran on unguarded (--keep-on-supervisor-loss). */
  unguarded_since: z.string().optional(),
});

const bindingSchema = z.looseObject({
  knob: z.string(),
  via: z.enum(["template", "config", "env", "argv", "code"]),
  file: z.string().optional(),
  key: z.string().optional(),
  file_sha256: z.string().optional(),
  /** argv: the flag's (or override's) index in the command, how the value sits there, the flag, trial 0's value */
  index: n.optional(),
  form: z.enum(["separate", "equals", "override", "switch"]).optional(),
  flag: z.string().optional(),
  value: z.union([z.number(), z.string(), z.boolean()]).optional(),
  /** config: the key holds the global batch (DeepSpeed's train_batch_size), written as micro-batch × accumulation × these ranks */
  global_batch_ranks: n.optional(),
  /** code: the value is an argument of the DataLoader built on `line`, set by the attach (no literal to edit) */
  argument: z.boolean().optional(),
  /** code: the 1-based line of `file` that holds `name = value` */
  line: n.optional(),
  name: z.string().optional(),
});

/** One trial of tune.json. */
export const trialSchema = z.looseObject({
  index: n,
  run_id: z.string().nullable(),
  knobs,
  purpose: z.string(),
  end: z.string(),
  samples_per_s: nn,
  /** samples_per_s is an upper bound (stopped as slower while a step was still running), not a measured rate */
  samples_per_s_bound: z.boolean().optional(),
  /**
   * What samples_per_s counts when no step of the job said its samples: "batches" (batches a second,
   * valid while the micro-batch stays the same) or "steps" (optimizer steps a second, valid while the
   * knob does not change the samples of a step); absent: samples.
   */
  rate_unit: z.enum(["batches", "steps"]).optional(),
  /** "job": samples_per_s is the job's own printed rate over the steps brim counted (no step said its samples) */
  rate_from: z.enum(["job"]).optional(),
  peak_bytes: nn,
  framework_peak_bytes: nn.default(null),
  gpu_util_mean: nn,
  data_wait_share: nn,
  duration_s: n.default(0),
  oom_recoveries: n.default(0),
  /** Why the trial gave no throughput: kind (memory, cap, crash, time_limit, hung, slower, ...) and the one-line cause. */
  failure: z.looseObject({ kind: z.string(), cause: z.string() }).nullable().optional(),
  /** The last lines of a failed trial's output. */
  tail: z.array(z.string()).optional(),
  /** Seconds from the start of the process to its first step (start-up, imports, device and data set-up). */
  fixed_cost_s: nn.optional(),
  /** Seconds of steady steps measured, and why the measurement ended (stable, window, steps, slower). */
  measured_s: nn.optional(),
  stopped_by: z.string().nullable().optional(),
  samples_per_step: nn.optional(),
  /** The batch dimension of the model's input per step, as the attach read it in a few of the first DataLoader-fed steps (their median); absent when none said it. */
  model_samples_per_step: nn.optional(),
  /** Its samples per step did not follow its micro-batch or accumulation (the finding): its samples/s is not compared with trial 0's, and it may not win. */
  not_comparable: z.string().optional(),
  sm_activity_mean: nn.optional(),
  /** Batches per optimizer step the job reported, and the effective batch that ran (micro-batch × accumulation). */
  accumulation: nn.optional(),
  effective_batch: nn.optional(),
  /**
   * The job's evaluation in this trial, as the attach saw it: ran (a loader fetched with gradients off,
   * not trained on) or not (a loader built and never iterated beside one that trained), with that
   * loader's file:line; absent with no evidence of evaluation, and in older records.
   */
  evaluation: z.looseObject({ ran: z.boolean(), where: z.string().nullable() }).optional(),
});

/** tune.json (schema `brim.tune/v1`); docs/run-store.md names every field. */
export const tuneSchema = z.looseObject({
  schema: z.literal("brim.tune/v1"),
  id: z.string(),
  command: z.array(z.string()),
  cwd: z.string(),
  bindings: z.array(bindingSchema),
  cap_bytes: n,
  cap_scope: z.enum(["gpu", "ram"]),
  effective_batch: nn.default(null),
  name: recordName,
  tags: recordTags,
  started_at: z.string(),
  ended_at: z.string().nullable(),
  trials: z.array(trialSchema),
  winner: z.looseObject({ index: n, knobs, speedup: nn }).nullable(),
  stop_reason: z.string().nullable(),
  /** Relative noise of one trial's throughput, as the search estimated it. */
  noise: n.optional(),
  /** The search that ran: "brim", "doubling-bisection" or "grid". */
  strategy: z.string().optional(),
  memory_line: z.looseObject({ intercept_bytes: n, bytes_per_sample: n, margin_bytes: n, predicted_max_micro_batch: n }).nullable().default(null),
  notes: z.array(z.string()).default([]),
  /**
   * The knobs the search dropped (the micro-batch and its accumulation) when trial `trial` came back
   * not comparable, and the finding; the other knobs were tuned at the baseline's micro-batch. Absent
   * when none was dropped.
   */
  dropped: z.looseObject({ knobs: z.array(z.string()), trial: n, reason: z.string() }).optional(),
  /** The budget stated up front: trials and seconds at most. */
  budget: z.looseObject({ max_trials: n, max_time_s: n }).optional(),
  /** The effective-batch policy in force ("held" / "free" / "none") and what the winner does to it. */
  effective_batch_policy: z.looseObject({ kind: z.string(), before: nn, after: nn, text: z.string() }).optional(),
  /**
   * The winner and the baseline measured again, interleaved (A/B/A/B): the speedup (ratio of geometric
   * means) with its 95 % interval; "slower" when the interval lies wholly below 1.0 (your configuration
   * is faster); "no_gain" when the interval holds 1.0 or nothing beat the baseline (with either, there
   * is no winner, and nothing to apply).
   */
  confirmation: z
    .looseObject({
      verdict: z.enum(["confirmed", "slower", "no_gain"]),
      speedup: nn,
      low: nn,
      high: nn,
      noise: nn,
      df: nn,
      baseline_rates: z.array(n),
      winner_rates: z.array(n),
    })
    .nullable()
    .optional(),
  /**
   * Loss parity (issue 37): the per-optimizer-step losses of your configuration's and the winner's
   * confirmation runs compared from step 0; absent when no confirmation pair ran, or in records older
   * than it. docs/run-store.md names every field.
   */
  parity: z
    .looseObject({
      verdict: z.enum(["match", "parted", "nonfinite", "not_comparable", "batch_changed"]),
      /** the verdict as printed */
      line: z.string(),
      /** the samples of one optimizer step in each run, and whether the winner holds it */
      effective_batch: z.looseObject({ before: nn, after: nn, held: z.boolean() }),
      baseline_trial: n,
      winner_trial: n,
      precisions: z.looseObject({ baseline: z.string(), winner: z.string() }),
      steps: n.optional(),
      tolerance: n.optional(),
      max_diff: n.optional(),
      step: n.optional(),
      baseline: z.union([n, z.string()]).optional(),
      winner: z.union([n, z.string()]).optional(),
      diff: nn.optional(),
      reason: z.string().optional(),
      /** nonfinite: the precision the winner's loss went non-finite in */
      precision: z.string().optional(),
      baseline_losses: z.array(z.union([n, z.string(), z.null()])),
      winner_losses: z.array(z.union([n, z.string(), z.null()])),
      /** each param group's learning rate at the first optimizer step of each run (the attach's model_facts), when it sent them */
      lr: z.looseObject({ baseline: z.array(nn), winner: z.array(nn) }).optional(),
      /** what changed between the two runs, named from the attach's evidence (learning rate, batch-statistic layers) */
      evidence: z.array(z.looseObject({ kind: z.string(), text: z.string() })).default([]),
    })
    .optional(),
  /** What still limits the job in the configuration the tune ends with (its closing lines). */
  limits: z.array(z.string()).optional(),
  /**
   * Whether the job's evaluation ran in the trials of the configuration the tune ends with (the
   * winner's, else trial 0's), so that its memory is in their peak; the trials it ran in; the line
   * printed. Absent when no trial showed evidence of evaluation, and in older records.
   */
  evaluation: z.looseObject({ ran: z.boolean(), trials: z.array(n), line: z.string() }).optional(),
  /** With no winner: why, and the next thing to try. */
  no_winner: z.looseObject({ reason: z.string(), next: z.string() }).nullable().optional(),
});

/** How a job ended (docs/run-store.md). */
export type EndCause = z.output<typeof endCauseSchema>;
/** The end of a run as run.json records it. */
export type RunEnd = Known<z.output<typeof runEndSchema>>;
/** Numbers brim measured over a run; `null` where it could not measure, never 0. */
export type RunSummary = Known<z.output<typeof summarySchema>>;
/** What the run store knows about the devices a run used. */
export type RunDevice = Known<z.output<typeof runDeviceSchema>>;
/** run.json (schema `brim.run/v1`). */
export type RunMeta = Known<z.output<typeof runSchema>>;
/** One line of timeline.ndjson: always `t` (Unix seconds) and `kind`; the rest depends on the kind. */
export interface TimelineEntry {
  t: number;
  kind: string;
  [field: string]: unknown;
}
/** Where a knob reaches the job. */
export type KnobBindingRecord = Known<z.output<typeof bindingSchema>>;
/** One trial as tune.json records it. */
export type TuneTrialRecord = Known<z.output<typeof trialSchema>>;
/** tune.json (schema `brim.tune/v1`). */
export type TuneRecord = Known<z.output<typeof tuneSchema>>;

function checked<S extends z.ZodType>(schema: S, value: unknown, file: string, expected: string): z.output<S> {
  const version = typeof value === "object" && value !== null && "schema" in value ? value.schema : undefined;
  if (typeof version === "string" && version !== expected && version.startsWith(expected.slice(0, expected.lastIndexOf("/") + 1))) {
    throw new BrimError("E_PARSE", `${file} is written by a newer brim (schema ${version}); this brim reads ${expected}: upgrade brim to read it`);
  }
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue === undefined || issue.path.length === 0 ? "(the record)" : issue.path.map(String).join(".");
  throw new BrimError("E_PARSE", `${file} is damaged: field ${field}: ${issue?.message ?? "invalid"}`);
}

/**
 * A run.json's content, checked: throws `E_PARSE` naming the file and the field when it is damaged
 * or from a newer brim. Fields older records lack get their default (`throughput_source: null`);
 * fields this brim does not know are kept.
 *
 * @example
 * ```ts
 * const meta = parseRunMeta(JSON.parse(text), ".brim/runs/20261122-101500-3f2a/run.json");
 * ```
 */
export function parseRunMeta(value: unknown, file: string): RunMeta {
  return checked(runSchema, value, file, "brim.run/v1");
}

/**
 * A tune.json's content, checked like {@link parseRunMeta}: every field the tuner writes, and any a
 * newer tuner writes, comes back.
 *
 * @example
 * ```ts
 * const tune = parseTuneRecord(JSON.parse(text), ".brim/tunes/20261122-101000-aa01/tune.json");
 * ```
 */
export function parseTuneRecord(value: unknown, file: string): TuneRecord {
  return checked(tuneSchema, value, file, "brim.tune/v1");
}

/**
 * Whether a timeline line's value is an entry: a JSON object with a finite numeric `t` and a string
 * `kind` (its other fields are read per kind). By hand rather than by a schema: it runs once per line
 * of timelines millions of lines long.
 *
 * @example
 * ```ts
 * isTimelineEntry({ t: 1, kind: "start", pid: 4 }); // true
 * isTimelineEntry({ t: "1", kind: "start" });       // false
 * ```
 */
export function isTimelineEntry(value: unknown): value is TimelineEntry {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const e = value as { t?: unknown; kind?: unknown };
  return typeof e.t === "number" && Number.isFinite(e.t) && typeof e.kind === "string";
}
