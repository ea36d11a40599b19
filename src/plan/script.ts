/**
 * `brim plan -- <command>`: a plan from a training script, with no model spec. The footprint is
 * what the job's own training steps held, captured inside the process by python/brim/_footprint.py
 * at two micro-batches (parameters, gradients, optimizer state, bytes autograd saved per forward,
 * the batch); this module fits the fixed and per-sample parts, builds a model profile and plans it
 * for each GPU asked, side by side, saying for every figure whether it was measured, modelled or
 * calibrated. Pure: the runs are the caller's.
 * @module
 */
import { z } from "zod";
import { InputError } from "../errors/index.ts";
import { findGpu } from "./catalog.ts";
import { type Component } from "./memory.ts";
import { divisors, plan, type PlanReport } from "./planner.ts";
import type { ModelProfile } from "./profile.ts";
import { convolutionSchema, convWorkspaceBytes, recurrentBytes, recurrentCallSchema, type RecurrentBytes } from "./cudnn.ts";
import type { Optimizer, Precision } from "./spec.ts";
import { optimizerProvenance, scriptOptimizer, type OptimizerFrom } from "./script-optimizer.ts";

export { optimizerOf, UNSEEN_OPTIMIZER } from "./script-optimizer.ts";

/** The GPUs planned for when `--gpu` is not given: a Kaggle/Colab card, a workstation card, two datacentre cards. */
export const DEFAULT_SCRIPT_GPUS = ["t4", "rtx-4090", "a100-80gb", "h100-sxm"] as const;

/** The precisions whose largest micro-batch each GPU's row shows. */
export const SCRIPT_PRECISIONS: readonly Precision[] = ["fp32", "bf16-mixed", "fp16-mixed"];

/**
 * How far off this path's plans were on the GPU, leave-one-job-out, on the recorded H100 pairs:
 * each job's fp32 run measured on a CPU (bench/results/plan-script-h100.json), every precision
 * planned from it, constants fitted to the other jobs —
 * `bench/results/gpu/nvidia-h100-80gb-hbm3/plan-validation.json` (source "script"): all pairs; the
 * jobs whose every term another job shows; and the job a term of its own keeps out (the only one
 * with a convolution, whose cuDNN workspace is calibrated on it alone).
 * test/plan/script.test.ts keeps these equal to that record.
 */
export const PROFILE_ACCURACY = {
  record: "bench/results/gpu/nvidia-h100-80gb-hbm3/plan-validation.json",
  pairs: 60,
  median_abs_error: 0.03897575195589382,
  worst_abs_error: 0.30791538346539726,
  no_own_term: { pairs: 48, median_abs_error: 0.033807940483835744, worst_abs_error: 0.3048655002138188 },
  convolution: { job: "cnn-lstm", pairs: 12, median_error: -0.19561516302943027, worst_error: -0.30791538346539726 },
} as const;

const count = z.number().int().nonnegative();

/** One "footprint" event the attach sends after a backward (python/brim/_footprint.py). */
export const footprintEventSchema = z.looseObject({
  forward: count,
  saved_bytes: count.nullable(),
  largest_saved_bytes: count.nullable().optional(),
  batch_bytes: count.nullable(),
  batch_samples: count.nullable(),
  grad_bytes: count,
  optimizer_state_bytes: count,
  optimizers: z.array(z.string()),
  autocast: z.string().nullable(),
  recurrent: z.array(recurrentCallSchema).optional(),
  largest_saved_outside_recurrent_bytes: count.optional(),
  convolutions: z.array(convolutionSchema).optional(),
  params: z
    .looseObject({
      total: count,
      trainable: count,
      by_dtype: z.record(z.string(), count),
      buffer_bytes: count,
      tensors: z.array(z.object({ name: z.string(), shape: z.array(count), trainable: z.boolean() })),
      tensors_listed: z.boolean(),
    })
    .optional(),
});

/** A footprint event, parsed. */
export type FootprintEvent = z.output<typeof footprintEventSchema>;

/** What one measuring run's steps held, at one micro-batch. */
export interface MeasuredPoint {
  run_id: string;
  micro_batch: number;
  /** forwards (one per backward) the run counted */
  forwards: number;
  /** bytes autograd saved in one forward (the largest forward of the run), on the CPU */
  saved_bytes: number;
  /** that forward's LSTM/GRU layers: what they saved on the CPU and what cuDNN keeps instead; null when it had none */
  recurrent: RecurrentBytes | null;
  /** the largest 1-D convolution's im2col bytes in that forward (cuDNN's workspace before its factor); null when none */
  conv_workspace_bytes: number | null;
  largest_saved_bytes: number;
  batch_bytes: number | null;
  grad_bytes: number;
  optimizer_state_bytes: number;
  /** the process tree's RSS peak, for the record (CPU: the whole process, not the step) */
  rss_peak_bytes: number | null;
  /** autocast dtype in force during the backward, if any */
  autocast: string | null;
}

/**
 * The point one run measured, from its footprint events: the largest forward at the micro-batch
 * the DataLoader gave (or `microBatch` when the job has no DataLoader).
 *
 * @example
 * ```ts
 * const { point, params, optimizers } = pointFromEvents(events, "run-1", 32, null);
 * ```
 */
export function pointFromEvents(
  events: readonly unknown[],
  runId: string,
  microBatch: number | null,
  rssPeak: number | null,
): { point: MeasuredPoint; params: NonNullable<FootprintEvent["params"]>; optimizers: string[] } {
  const parsed = events.map((e) => footprintEventSchema.safeParse(e)).flatMap((r) => (r.success ? [r.data] : []));
  const params = parsed.find((e) => e.params !== undefined)?.params;
  if (parsed.length === 0 || params === undefined)
    throw new InputError(
      `run ${runId} ran no backward that brim could see (no loss.backward() in the main process): nothing to measure; plan from a model spec instead (brim plan model.yaml, docs/model-spec.md)`,
    );
  const samples = parsed.map((e) => e.batch_samples).filter((n): n is number => n !== null && n > 0);
  // the micro-batch of the run: what the loader gave most (a short last batch is not it)
  const seen = mode(samples) ?? microBatch;
  if (seen === null)
    throw new InputError(
      `run ${runId}: the job's batches showed no batch dimension and no batch_size knob reaches it; give one with a {batch_size} template or --bind`,
    );
  const at = parsed.filter((e) => e.saved_bytes !== null && (e.batch_samples === null || e.batch_samples === seen));
  const largestForward = at.reduce<FootprintEvent | undefined>((best, e) => ((e.saved_bytes ?? 0) > (best?.saved_bytes ?? -1) ? e : best), undefined);
  const saved = Math.max(0, largestForward?.saved_bytes ?? 0);
  const recurrent = recurrentBytes(largestForward?.recurrent ?? [], largestForward?.largest_saved_outside_recurrent_bytes ?? 0);
  const last = parsed.at(-1) as FootprintEvent;
  return {
    point: {
      run_id: runId,
      micro_batch: seen,
      forwards: parsed.length,
      saved_bytes: saved,
      recurrent,
      conv_workspace_bytes: convWorkspaceBytes(largestForward?.convolutions ?? []),
      largest_saved_bytes: Math.max(0, ...at.map((e) => e.largest_saved_bytes ?? 0)),
      batch_bytes: Math.max(0, ...at.map((e) => e.batch_bytes ?? 0)) || null,
      grad_bytes: Math.max(...parsed.map((e) => e.grad_bytes)),
      optimizer_state_bytes: Math.max(...parsed.map((e) => e.optimizer_state_bytes)),
      rss_peak_bytes: rssPeak,
      autocast: last.autocast,
    },
    params,
    optimizers: last.optimizers,
  };
}

function mode(values: readonly number[]): number | null {
  const counts = new Map<number, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  let best: number | null = null;
  for (const [v, n] of counts) if (best === null || n > (counts.get(best) ?? 0) || (n === counts.get(best) && v > best)) best = v;
  return best;
}

/** The fixed and per-sample parts of what a step saves, from one or two measured points. */
export interface FootprintFit {
  points: MeasuredPoint[];
  saved_per_sample_bytes: number;
  saved_fixed_bytes: number;
  input_per_sample_bytes: number;
  /** "two-point": slope and intercept measured; "one-point": all saved bytes counted per sample (an over-estimate) */
  method: "two-point" | "one-point";
}

/** What a point's forward saves on a GPU: the CPU's bytes, with its recurrent layers counted as cuDNN keeps them. */
const savedOnGpu = (p: MeasuredPoint): number => p.saved_bytes - (p.recurrent?.cpu_saved_bytes ?? 0) + (p.recurrent?.cudnn_saved_bytes ?? 0);

/**
 * Fits saved bytes = fixed + micro-batch × per-sample through the measured points, the recurrent
 * layers' bytes as cuDNN keeps them (src/plan/cudnn.ts).
 *
 * @example
 * ```ts
 * fitFootprint([p16, p32]).saved_per_sample_bytes;
 * ```
 */
export function fitFootprint(points: readonly MeasuredPoint[]): FootprintFit {
  const sorted = [...points].sort((a, b) => a.micro_batch - b.micro_batch);
  const lo = sorted[0];
  const hi = sorted.at(-1);
  if (lo === undefined || hi === undefined) throw new InputError("no measured point to plan from");
  const inputOf = (p: MeasuredPoint): number => (p.batch_bytes ?? 0) / p.micro_batch;
  if (hi.micro_batch === lo.micro_batch) {
    return {
      points: sorted,
      saved_per_sample_bytes: savedOnGpu(hi) / hi.micro_batch,
      saved_fixed_bytes: 0,
      input_per_sample_bytes: inputOf(hi),
      method: "one-point",
    };
  }
  const slope = Math.max(0, (savedOnGpu(hi) - savedOnGpu(lo)) / (hi.micro_batch - lo.micro_batch));
  return {
    points: sorted,
    saved_per_sample_bytes: slope,
    saved_fixed_bytes: Math.max(0, savedOnGpu(lo) - slope * lo.micro_batch),
    input_per_sample_bytes: Math.max(inputOf(lo), inputOf(hi)),
    method: "two-point",
  };
}

/**
 * A model profile (the SDK's schema) from a fit and the parameters the job held.
 *
 * @example
 * ```ts
 * const profile = profileFromFit(fitFootprint(points), params, "train.py");
 * ```
 */
export function profileFromFit(fit: FootprintFit, params: NonNullable<FootprintEvent["params"]>, name: string): ModelProfile {
  const lo = fit.points[0] as MeasuredPoint;
  const hi = fit.points.at(-1) as MeasuredPoint;
  // the largest saved tensor can be one that does not grow with the batch (autocast's 16-bit copy of a
  // weight): per sample it is what grows between the two points, not what one point holds ÷ its batch
  // recurrent layers' CPU tensors are not cuDNN's: the largest outside them sizes the other layers' backward
  const largestOf = (p: MeasuredPoint): number => p.recurrent?.largest_saved_outside_bytes ?? p.largest_saved_bytes;
  const largestPerSample =
    fit.method === "two-point" ? Math.max(0, (largestOf(hi) - largestOf(lo)) / (hi.micro_batch - lo.micro_batch)) : largestOf(hi) / hi.micro_batch;
  // a run under autocast saved 16-bit activations: they are that precision's bytes, and fp32 is modelled as twice them
  const measuredIn = mixedOf(hi.autocast);
  const toFp32 = measuredIn === null ? 1 : 2;
  const cudnn = {
    ...(hi.recurrent === null
      ? {}
      : {
          backward_bytes: (toFp32 * hi.recurrent.cudnn_backward_bytes) / hi.micro_batch,
          cudnn_rnn_workspace_bytes: (toFp32 * hi.recurrent.cudnn_workspace_bytes) / hi.micro_batch,
        }),
    ...(hi.conv_workspace_bytes === null ? {} : { cudnn_conv_workspace_bytes: (toFp32 * hi.conv_workspace_bytes) / hi.micro_batch }),
  };
  const saved = measuredIn === null ? { fp32: fit.saved_per_sample_bytes } : { fp32: 2 * fit.saved_per_sample_bytes, [measuredIn]: fit.saved_per_sample_bytes };
  return {
    schema: "brim.model-profile",
    version: 1,
    name,
    params: {
      total: params.total,
      trainable: params.trainable,
      by_dtype: params.by_dtype,
      buffer_bytes: params.buffer_bytes,
      ...(params.tensors_listed ? { tensors: params.tensors } : {}),
    },
    per_sample: {
      input_bytes: Math.round(fit.input_per_sample_bytes),
      saved_bytes: saved,
      largest_saved_bytes: largestPerSample,
      ...cudnn,
    },
    fixed: { saved_bytes: { [measuredIn ?? "fp32"]: fit.saved_fixed_bytes } },
    measured: { batches: fit.points.map((p) => p.micro_batch), device: "cpu" },
  };
}

/** The mixed precision an autocast dtype seen in a measuring run stands for (`torch.bfloat16` → bf16-mixed). */
export function mixedOf(autocast: string | null): "bf16-mixed" | "fp16-mixed" | null {
  if (autocast?.includes("bfloat16") === true) return "bf16-mixed";
  if (autocast?.includes("float16") === true) return "fp16-mixed";
  return null;
}

/** Where a figure of the plan comes from. */
export type Provenance = "measured" | "modelled" | "calibrated" | "default";

/** One GPU's column of a script plan. */
export interface ScriptGpuPlan {
  gpu: { id: string; name: string; memory_bytes: number; budget_bytes: number };
  /** largest micro-batch that fits the budget, per precision; null where the GPU has no fast path for it */
  largest: Partial<Record<Precision, number | null>>;
  yours: { micro_batch: number; accumulation: number; precision: Precision; peak_bytes: number; share_of_gpu: number; fits: boolean };
  /** the largest micro-batch that keeps the effective batch (a divisor of it) and fits; null when yours is it */
  better: { micro_batch: number; accumulation: number; peak_bytes: number; share_of_gpu: number } | null;
  components: Record<Component, number>;
  /** the GPU-only terms and where their values come from */
  gpu_terms: { name: string; bytes: number; provenance: "calibrated" | "default"; source: string }[];
  calibration: string | null;
  report: PlanReport;
}

/** `brim plan -- <command>`'s answer. */
export interface ScriptPlan {
  schema: "brim.plan-script/v1";
  command: string[];
  fit: FootprintFit;
  params: { total: number; trainable: number };
  optimizer: Optimizer;
  /** seen: from the job's torch.optim classes and state; unseen: none created, {@link UNSEEN_OPTIMIZER} planned; --optimizer: given */
  optimizer_from: OptimizerFrom;
  optimizer_classes: string[];
  yours: { micro_batch: number; accumulation: number; effective_batch: number; precision: Precision; precision_from: string };
  /** where each single-GPU term comes from (a script plan is for one GPU: no communication buffers) */
  provenance: Record<Exclude<Component, "communication">, { provenance: Provenance; how: string }>;
  accuracy: typeof PROFILE_ACCURACY & {
    /** the recorded figure that speaks for this model: a model with convolutions has a cuDNN workspace only the cnn-lstm showed */
    for_this_model: "no_own_term" | "convolution";
  };
  gpus: ScriptGpuPlan[];
  notes: string[];
  profile: ModelProfile;
}

/** What {@link planScript} needs beside the measurement. */
export interface ScriptPlanOptions {
  command: string[];
  gpus: readonly string[];
  yours: { micro_batch: number; accumulation: number; precision: Precision; precision_from: string };
  margin?: number;
  notes?: string[];
  /** the model has convolutions (cuDNN runs them with a workspace a CPU run does not show) */
  convolutions?: boolean;
  /** --optimizer: the optimizer to plan, over the one seen */
  optimizer?: Optimizer | undefined;
}

/**
 * Plans a measured script for every GPU asked, side by side.
 *
 * @example
 * ```ts
 * const p = planScript(points, params, ["Adam"], { command, gpus: ["t4", "h100-sxm"], yours: { micro_batch: 32, accumulation: 1, precision: "fp32", precision_from: "the run" } });
 * p.gpus[0]?.largest["bf16-mixed"];
 * ```
 */
export function planScript(
  points: readonly MeasuredPoint[],
  params: NonNullable<FootprintEvent["params"]>,
  optimizerClasses: readonly string[],
  options: ScriptPlanOptions,
): ScriptPlan {
  const fit = fitFootprint(points);
  const profile = profileFromFit(fit, params, options.command.find((w) => w.endsWith(".py")) ?? options.command.join(" "));
  const hi = fit.points.at(-1) as MeasuredPoint;
  const { optimizer, from: optimizerFrom } = scriptOptimizer(optimizerClasses, hi.optimizer_state_bytes, params.trainable, options.optimizer);
  const effective = options.yours.micro_batch * options.yours.accumulation;
  const model = { kind: "profile" as const, profile };
  const gpus = options.gpus.map((id) => gpuPlanOf(model, id, optimizer, options));
  return {
    schema: "brim.plan-script/v1",
    command: options.command,
    fit,
    params: { total: params.total, trainable: params.trainable },
    optimizer,
    optimizer_from: optimizerFrom,
    optimizer_classes: [...optimizerClasses],
    yours: { ...options.yours, effective_batch: effective },
    provenance: provenanceOf(fit, hi, optimizerClasses, optimizer, optimizerFrom),
    accuracy: { ...PROFILE_ACCURACY, for_this_model: options.convolutions === true ? "convolution" : "no_own_term" },
    gpus,
    notes: scriptNotes(fit, hi, params, options.notes ?? []),
    profile,
  };
}

/** Your config, the largest micro-batch per precision and a better split on one GPU of the catalog. */
function gpuPlanOf(model: Parameters<typeof plan>[0], id: string, optimizer: ScriptPlan["optimizer"], options: ScriptPlanOptions): ScriptGpuPlan {
  const spec = findGpu(id);
  const { micro_batch: micro, accumulation } = options.yours;
  const effective = micro * accumulation;
  const margin = options.margin ?? 0.1;
  const base = { gpu: id, optimizer, margin, batch: micro, effectiveBatch: effective };
  let precision = options.yours.precision;
  let report: PlanReport;
  try {
    report = plan(model, { ...base, precision });
  } catch (error) {
    // a precision the card has no fast path for (bf16 on a T4): plan your config in fp16-mixed there
    if (!(error instanceof InputError) || !precision.startsWith("bf16")) throw error;
    precision = "fp16-mixed";
    report = plan(model, { ...base, precision });
  }
  const largest: ScriptGpuPlan["largest"] = {};
  for (const p of SCRIPT_PRECISIONS) {
    try {
      largest[p] = plan(model, { gpu: id, optimizer, margin, precision: p }).max_micro_batch;
    } catch {
      largest[p] = null;
    }
  }
  const memory = report.gpu.memory_bytes;
  const share = (bytes: number): number => Math.round((bytes / memory) * 1000) / 1000;
  const bigger = divisors(effective)
    .filter((d) => d <= report.max_micro_batch)
    .at(-1);
  let better: ScriptGpuPlan["better"] = null;
  if (bigger !== undefined && bigger !== micro) {
    const peak = plan(model, { ...base, precision, batch: bigger }).memory.peak_bytes;
    better = { micro_batch: bigger, accumulation: effective / bigger, peak_bytes: peak, share_of_gpu: share(peak) };
  }
  const byName = new Map(report.assumptions.map((a) => [a.name, a]));
  const terms: [string, number][] = [
    ["cuda_context_bytes", report.memory.components.cuda_context],
    ["cublas_workspace_bytes", report.memory.components.workspace],
    ["allocator_slack_fraction", report.memory.components.allocator_slack],
  ];
  return {
    gpu: { id: spec?.id ?? id, name: report.gpu.name, memory_bytes: memory, budget_bytes: report.gpu.budget_bytes },
    largest,
    yours: {
      micro_batch: micro,
      accumulation,
      precision,
      peak_bytes: report.memory.peak_bytes,
      share_of_gpu: share(report.memory.peak_bytes),
      fits: report.memory.fits,
    },
    better,
    components: report.memory.components,
    gpu_terms: terms.map(([name, bytes]) => {
      const a = byName.get(name);
      return { name, bytes, provenance: a?.calibrated === true ? "calibrated" : "default", source: a?.source ?? "" };
    }),
    calibration:
      report.calibration === null ? null : `${report.calibration.id} (${report.calibration.measured_on.gpu}, torch ${report.calibration.measured_on.torch})`,
    report,
  };
}

/** What the reader of the plan should know about how it was measured. */
function scriptNotes(fit: ScriptPlan["fit"], hi: MeasuredPoint, params: NonNullable<FootprintEvent["params"]>, given: readonly string[]): string[] {
  const notes = [...given];
  if (fit.method !== "two-point")
    notes.push(
      `measured at one micro-batch only (${hi.micro_batch}): all saved bytes are counted per sample, which over-states the per-sample part; a batch_size knob brim can set (a {batch_size} template, a config key or --bind) gives the fixed part too`,
    );
  if (hi.recurrent !== null)
    notes.push(
      `the recurrent layers (${hi.recurrent.calls} call(s) per forward at micro-batch ${hi.micro_batch}) saved ${hi.recurrent.cpu_saved_bytes} B on the CPU; they are planned as cuDNN keeps them, ${hi.recurrent.cudnn_saved_bytes} B (reserve space and output per token, src/plan/cudnn.ts)`,
    );
  if (hi.conv_workspace_bytes !== null)
    notes.push(
      `the 1-D convolutions' cuDNN workspace is modelled from the largest im2col matrix, ${hi.conv_workspace_bytes} B at micro-batch ${hi.micro_batch}, times the factor calibrated on the H100 (src/plan/cudnn.ts)`,
    );
  if (hi.batch_bytes === null) notes.push("the job fed no DataLoader batch brim could see: its inputs are inside the saved bytes, not a term of their own");
  const expected = 4 * params.trainable;
  if (hi.grad_bytes > 0 && Math.abs(hi.grad_bytes - expected) > 0.05 * expected)
    notes.push(`the job held ${hi.grad_bytes} bytes of gradients where 4 bytes per trainable parameter make ${expected}: the plan models ${expected}`);
  return notes;
}

/** Where each term of the plan comes from: measured in the job, modelled, or calibrated on a GPU. */
function provenanceOf(
  fit: ScriptPlan["fit"],
  hi: MeasuredPoint,
  optimizerClasses: readonly string[],
  optimizer: ScriptPlan["optimizer"],
  optimizerFrom: ScriptPlan["optimizer_from"],
): ScriptPlan["provenance"] {
  const two = fit.method === "two-point";
  return {
    weights: { provenance: "measured", how: "parameters of every module the job built, counted at its first backward" },
    gradients: {
      provenance: "measured",
      how: "one gradient per trainable parameter, in the precision's weight dtype (checked against the .grad bytes held)",
    },
    optimizer_state: optimizerProvenance(optimizerClasses, hi.optimizer_state_bytes, optimizer, optimizerFrom),
    activations: {
      provenance: two ? "measured" : "modelled",
      how: two
        ? `bytes autograd saved per forward at micro-batches ${fit.points.map((p) => p.micro_batch).join(" and ")} on the CPU (${mixedOf(hi.autocast) ?? "fp32"}), fixed and per-sample parts fitted; ${mixedOf(hi.autocast) === null ? "16-bit precisions modelled as half of fp32" : "fp32 modelled as twice the 16-bit bytes"}`
        : "bytes autograd saved at one micro-batch, all counted per sample",
    },
    input_batch: { provenance: "measured", how: "bytes of the tensors the DataLoader gave per sample" },
    temporaries: {
      provenance: "modelled",
      how: "backward's gradient buffers: twice the largest saved tensor per sample, or the optimizer step's working memory",
    },
    workspace: { provenance: "calibrated", how: "cuBLAS workspace per process: calibrated where the GPU's architecture has a calibration, else a default" },
    cuda_context: {
      provenance: "calibrated",
      how: "CUDA context and kernel images: calibrated where the GPU's architecture has a calibration, else a default",
    },
    allocator_slack: {
      provenance: "calibrated",
      how: "caching-allocator rounding and fragmentation as a share of what changes per step: calibrated or default, as above",
    },
  };
}
