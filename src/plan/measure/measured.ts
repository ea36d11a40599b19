/**
 * `brim plan --measure -- <command>`: the job run briefly at given knob values (brim.knob and `{name}`
 * templates) and what its measured peak says — a model spec's plan re-anchored on it
 * ({@link measuredTrial}), or, with no spec, whether the job fits this machine and a lower bound of
 * its largest micro-batch ({@link planMeasuredJob}). The job's output passes through to `say`.
 *
 * @example
 * ```ts
 * const plan = await planMeasuredJob({ measureBatch: 32 }, ["python", "train.py", "--bs", "{batch_size}"], (text) => process.stderr.write(text));
 * plan.fits;
 * ```
 * @module
 */
import { BrimError, UsageError } from "../../errors/index.ts";
import { openDevices, type Devices } from "../../devices/index.ts";
import type { GuardResult } from "../../guard/guard.ts";
import { newRecordId, RunStore, storeRoot } from "../../record/store.ts";
import { templateKnobs } from "../../knobs/index.ts";
import type { PlanTrial } from "../planner.ts";
import type { MeasuredJobPlan } from "../plan-types.ts";
import type { Precision } from "../spec.ts";
import { measuringRun } from "./run.ts";

/**
 * What `--measure` is asked, as the command line gives it.
 *
 * @example
 * ```ts
 * const options: MeasureOptions = { measureBatch: 32, precision: "bf16-mixed", margin: 0.1 };
 * ```
 */
export interface MeasureOptions {
  gpu?: string | undefined;
  gpuMemory?: number | undefined;
  precision?: Precision | undefined;
  batch?: number | undefined;
  measureBatch?: number | undefined;
  cap?: number | undefined;
  margin?: number | undefined;
  steps?: number | undefined;
  store?: string | undefined;
}

/**
 * Runs the job once with `knobs` (a `{name}` template filled from them) for `steps` steps and returns
 * the run; one that did not end ok is an error whose text ends with `consequence`.
 */
async function measureJob(
  command: string[],
  knobs: Record<string, number | string>,
  steps: number,
  store: string | undefined,
  say: (text: string) => void,
  devices: Devices,
  consequence: string,
): Promise<GuardResult> {
  const missing = templateKnobs(command).filter((name) => knobs[name] === undefined);
  if (missing.length > 0)
    throw new UsageError(
      `the command uses {${missing.join("}, {")}} and brim plan has no value for ${missing.length === 1 ? "it" : "them"}${missing.includes("batch_size") ? ": give the micro-batch to measure with --measure-batch <n>" : ""}`,
    );
  const precision = knobs.precision !== undefined ? ` (${knobs.precision})` : "";
  const cwd = process.cwd();
  return measuringRun(
    {
      command,
      cwd,
      bindings: [],
      documents: new Map(),
      knobs,
      copyTag: { kind: "plan", owner: newRecordId(), index: 0 },
      steps,
      at: knobs.batch_size !== undefined ? `at micro-batch ${knobs.batch_size}${precision}` : `at its own config${precision}`,
      consequence,
      // the job's output passes through, on stderr
      guard: { hz: 20, hungAfterS: 900, onChunk: (_stream, chunk) => say(chunk) },
    },
    { devices, store: new RunStore(storeRoot(store, process.env, cwd)), say },
  );
}

/**
 * The job measured at a plan's micro-batch and precision (knobs batch_size, precision,
 * accumulation=1): its peak (GPU memory, or RAM when it ran on the CPU), for the plan to be
 * re-anchored on. A job that ran another micro-batch than asked is an error.
 *
 * @example
 * ```ts
 * const trial = await measuredTrial(["python", "train.py"], { microBatch: 64, precision: "fp32", steps: 6 }, say, devices);
 * trial.peak_bytes;
 * ```
 */
export async function measuredTrial(
  command: string[],
  at: { microBatch: number; precision: Precision; steps: number; store?: string | undefined },
  say: (text: string) => void,
  devices: Devices,
): Promise<PlanTrial> {
  const knobs = { batch_size: at.microBatch, precision: at.precision, accumulation: 1 };
  const run = await measureJob(command, knobs, at.steps, at.store, say, devices, "the plan is not re-anchored");
  const { meta, summary } = run;
  if (summary.micro_batch !== null && summary.micro_batch !== at.microBatch) {
    throw new BrimError("E_INPUT", `the job ran micro-batch ${summary.micro_batch}, not the ${at.microBatch} asked for: does it read brim.knob("batch_size")?`);
  }
  const onGpu = meta.device.backend !== "cpu";
  const peak = onGpu ? summary.peak_tree_gpu_bytes : summary.peak_tree_rss_bytes;
  if (peak === null) throw new BrimError("E_INPUT", `the measuring run ${meta.id} recorded no ${onGpu ? "GPU" : "RAM"} peak; the plan is not re-anchored`);
  return {
    micro_batch: at.microBatch,
    precision: at.precision,
    peak_bytes: peak,
    allocated_bytes: onGpu ? (summary.framework_peak_allocated_bytes ?? undefined) : undefined,
    reserved_bytes: onGpu ? (summary.framework_peak_reserved_bytes ?? undefined) : undefined,
    memory: onGpu ? "gpu" : "ram",
    source: `run ${meta.id}, ${summary.steps} steps${summary.micro_batch === null ? ", micro-batch not reported by the job" : ""}`,
  };
}

/**
 * `brim plan --measure -- <command>`: runs the job briefly at its own config (or at `--measure-batch`,
 * filling a `{batch_size}` template), and plans from the measured peak: whether it fits the memory
 * there is, and a safe lower bound of the largest micro-batch. A model spec gives the memory by
 * component ({@link measuredTrial}).
 *
 * @example
 * ```ts
 * const plan = await planMeasuredJob({ measureBatch: 32 }, ["python", "train.py", "--bs", "{batch_size}"], say);
 * plan.largest_micro_batch_at_least;
 * ```
 */
export async function planMeasuredJob(options: MeasureOptions, command: string[], say: (text: string) => void, devices?: Devices): Promise<MeasuredJobPlan> {
  if (command.length === 0) throw new UsageError("--measure needs the job's command after --, e.g. brim plan --measure -- python train.py");
  if (options.gpu !== undefined)
    throw new UsageError("--gpu needs a model spec to plan for a card not measured here: brim plan <model> --gpu <id> --measure -- <command>");
  const machine = devices ?? openDevices();
  const batch = options.measureBatch ?? options.batch;
  const knobs: Record<string, number | string> = {};
  if (batch !== undefined) knobs.batch_size = batch;
  if (options.precision !== undefined) knobs.precision = options.precision;
  const run = await measureJob(command, knobs, options.steps ?? 6, options.store, say, machine, "nothing is planned");
  const { meta, summary, timeline } = run;
  const onGpu = meta.device.backend !== "cpu";
  const peak = onGpu ? summary.peak_tree_gpu_bytes : summary.peak_tree_rss_bytes;
  if (peak === null) throw new BrimError("E_INPUT", `the measuring run ${meta.id} recorded no ${onGpu ? "GPU" : "RAM"} peak; nothing is planned`);
  const gpu = meta.device.gpus.find((g) => timeline.measured.gpu_indexes.includes(g.index)) ?? meta.device.gpus[0];
  const [limit, limitSource]: [number, MeasuredJobPlan["limit_source"]] =
    options.cap !== undefined
      ? [options.cap, "--cap"]
      : options.gpuMemory !== undefined
        ? [options.gpuMemory, "--gpu-memory"]
        : onGpu && gpu !== undefined
          ? [gpu.total_bytes, "gpu_total"]
          : [meta.device.host.mem_total_bytes, "host_total"];
  const margin = options.margin ?? 0.1;
  const usable = limit * (1 - margin);
  const microBatch = summary.micro_batch ?? batch ?? null;
  const precisions = new Set(timeline.steps.map((s) => s.precision).filter((p): p is string => p !== null));
  return {
    schema: "brim.plan-measured/v1",
    run_id: meta.id,
    command: meta.command,
    memory: onGpu ? "gpu" : "ram",
    device: onGpu ? (gpu?.name ?? "GPU") : `CPU (${meta.device.host.cpus} cores)`,
    micro_batch: microBatch,
    precision: options.precision ?? (precisions.size === 1 ? ([...precisions][0] as string) : null),
    steps: summary.steps,
    peak_bytes: peak,
    limit_bytes: limit,
    limit_source: limitSource,
    margin,
    usable_bytes: usable,
    fits: peak <= usable,
    largest_micro_batch_at_least: microBatch !== null && peak > 0 ? Math.max(1, Math.floor((microBatch * usable) / peak)) : null,
  };
}
