/**
 * run.json and tune.json on read: parsed, normalized (fields older records lack get their
 * documented default) and validated, so that the rest of brim works on checked records. A damaged
 * record, or one written by a newer brim, is an error that names the file and the field.
 *
 * @module
 */
import { z } from "zod";
import { BrimError } from "../errors/index.ts";
import type { RunMeta, TuneRecord } from "./types.ts";

const n = z.number();
const nn = z.number().nullable();
const knobs = z.record(z.string(), z.union([z.number(), z.string(), z.boolean()]));

const summarySchema = z.object({
  duration_s: n,
  steps: n,
  steady_steps: n,
  samples: n,
  samples_per_s: nn,
  throughput_source: z.enum(["sdk", "attach", "progress"]).nullable().default(null),
  data_wait_share: nn,
  step_time_s: nn,
  peak_tree_gpu_bytes: nn,
  peak_tree_rss_bytes: nn,
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
});

const runSchema = z.object({
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
  device: z.object({
    backend: z.enum(["nvml", "nvidia-smi", "cpu"]),
    driver: z.string().nullable(),
    gpus: z.array(z.object({ index: n, name: z.string(), uuid: z.string().nullable(), total_bytes: n })),
    host: z.object({ cpus: n, mem_total_bytes: n }),
  }),
  versions: z.record(z.string(), z.string()).default({}),
  started_at: z.string(),
  ended_at: z.string().nullable(),
  end: z
    .object({
      cause: z.enum(["ok", "gpu_oom", "host_oom", "gpu_fault", "hung", "crashed", "interrupted", "cap_exceeded", "store_failed", "supervisor_lost"]),
      exit_code: nn,
      signal: z.string().nullable(),
      message: z.string(),
    })
    .nullable(),
  summary: summarySchema.nullable(),
  unguarded_since: z.string().optional(),
});

const tuneSchema = z.object({
  schema: z.literal("brim.tune/v1"),
  id: z.string(),
  command: z.array(z.string()),
  cwd: z.string(),
  bindings: z.array(
    z.object({
      knob: z.string(),
      via: z.enum(["template", "config", "env", "argv"]),
      file: z.string().optional(),
      key: z.string().optional(),
      file_sha256: z.string().optional(),
      index: n.optional(),
      form: z.enum(["separate", "equals", "override", "switch"]).optional(),
      flag: z.string().optional(),
      value: z.union([z.number(), z.string(), z.boolean()]).optional(),
    }),
  ),
  cap_bytes: n,
  cap_scope: z.enum(["gpu", "ram"]),
  effective_batch: nn.default(null),
  started_at: z.string(),
  ended_at: z.string().nullable(),
  trials: z.array(
    z.object({
      index: n,
      run_id: z.string().nullable(),
      knobs,
      purpose: z.string(),
      end: z.string(),
      samples_per_s: nn,
      samples_per_s_bound: z.boolean().optional(),
      peak_bytes: nn,
      framework_peak_bytes: nn.default(null),
      gpu_util_mean: nn,
      data_wait_share: nn,
      duration_s: n.default(0),
      oom_recoveries: n.default(0),
      failure: z.object({ kind: z.string(), cause: z.string() }).nullable().optional(),
      tail: z.array(z.string()).optional(),
      fixed_cost_s: nn.optional(),
      measured_s: nn.optional(),
      stopped_by: z.string().nullable().optional(),
      samples_per_step: nn.optional(),
      sm_activity_mean: nn.optional(),
      accumulation: nn.optional(),
      effective_batch: nn.optional(),
    }),
  ),
  winner: z.object({ index: n, knobs, speedup: nn }).nullable(),
  stop_reason: z.string().nullable(),
  noise: n.optional(),
  strategy: z.string().optional(),
  memory_line: z.object({ intercept_bytes: n, bytes_per_sample: n, margin_bytes: n, predicted_max_micro_batch: n }).nullable().default(null),
  notes: z.array(z.string()).default([]),
  budget: z.object({ max_trials: n, max_time_s: n }).optional(),
  effective_batch_policy: z.object({ kind: z.string(), before: nn, after: nn, text: z.string() }).optional(),
  no_winner: z.object({ reason: z.string(), next: z.string() }).nullable().optional(),
  limits: z.array(z.string()).optional(),
  confirmation: z
    .object({
      verdict: z.enum(["confirmed", "no_gain"]),
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
});

function checked(schema: z.ZodType, value: unknown, file: string, expected: string): unknown {
  const version = typeof value === "object" && value !== null ? (value as { schema?: unknown }).schema : undefined;
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
 * or from a newer brim. Fields older records lack get their default (`throughput_source: null`).
 *
 * @example
 * ```ts
 * const meta = parseRunMeta(JSON.parse(text), ".brim/runs/20261122-101500-3f2a/run.json");
 * ```
 */
export function parseRunMeta(value: unknown, file: string): RunMeta {
  return checked(runSchema, value, file, "brim.run/v1") as RunMeta;
}

/**
 * A tune.json's content, checked like {@link parseRunMeta}.
 *
 * @example
 * ```ts
 * const tune = parseTuneRecord(JSON.parse(text), ".brim/tunes/20261122-101000-aa01/tune.json");
 * ```
 */
export function parseTuneRecord(value: unknown, file: string): TuneRecord {
  return checked(tuneSchema, value, file, "brim.tune/v1") as TuneRecord;
}
