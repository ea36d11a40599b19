/**
 * The numbers of a run, by the definitions in DESIGN.md ("What brim measures, exactly"), taken from
 * run.json's summary where brim recorded one and computed from the timeline otherwise (a run still
 * going, or one that crashed before its summary was written).
 *
 * @module
 */
import type { RunMeta, RunSummary } from "../record/types.ts";
import { gpuFacts, type GpuFacts } from "./gpu.ts";
import { mainSteps, stepStart, type SampleEntry, type StepEntry, type Timeline } from "./timeline.ts";

/**
 * Where the precision in force was read from.
 *
 * @example
 * ```ts
 * const from: PrecisionSource = "knob_read";
 * ```
 */
export type PrecisionSource = "knob_read" | "run_knobs" | "precision_fallback";

/**
 * A run's measured numbers. `null` where nothing measured it.
 *
 * @example
 * ```ts
 * const m: RunMeasures = measureRun(meta, readTimeline(timeline));
 * m.samples_per_s; // 412.5
 * ```
 */
export interface RunMeasures {
  duration_s: number | null;
  steps: number;
  steady_steps: number;
  samples: number;
  samples_per_s: number | null;
  data_wait_share: number | null;
  /** medians over the steady steps of the main process */
  step_time_s: number | null;
  wait_time_s: number | null;
  compute_time_s: number | null;
  peak_tree_gpu_bytes: number | null;
  peak_tree_rss_bytes: number | null;
  framework_peak_allocated_bytes: number | null;
  framework_peak_reserved_bytes: number | null;
  gpu_util_mean: number | null;
  sm_activity_mean: number | null;
  /** mean CPU use of the job's process tree over steady state, 100 = one core */
  tree_cpu_percent_mean: number | null;
  host_cpu_percent_mean: number | null;
  oom_recoveries: number;
  micro_batch: number | null;
  accumulation: number | null;
  precision: string | null;
  precision_source: PrecisionSource | null;
  /** the loader workers in force (knob `num_workers` as the job read it, else the run's knobs) */
  num_workers: number | null;
  /** first steady step's start to last steady step's end, Unix seconds */
  steady_window: [number, number] | null;
  /** GPU memory or RAM the job may use: the cap, else the card's (or host's) total */
  memory_limit_bytes: number | null;
  memory_limit_source: "cap" | "gpu_total" | "host_total" | null;
  /** null for a CPU run */
  gpu: GpuFacts | null;
  /** indexes of the GPUs the job used (those that showed activity or memory change) */
  gpu_indexes: number[];
  host_cpus: number | null;
}

/**
 * The median of a list, or null when empty.
 *
 * @example
 * ```ts
 * median([3, 1, 2]); // 2
 * ```
 */
export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/**
 * The mean of a list, or null when empty.
 *
 * @example
 * ```ts
 * mean([1, 2, 6]); // 3
 * ```
 */
export function mean(values: readonly number[]): number | null {
  return values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length;
}

/**
 * The largest of the non-null values, or null when there is none (safe for long lists, unlike
 * `Math.max(...values)`).
 *
 * @example
 * ```ts
 * maxOf([3, null, 7]); // 7
 * ```
 */
export function maxOf(values: readonly (number | null)[]): number | null {
  let best: number | null = null;
  for (const v of values) if (v !== null && (best === null || v > best)) best = v;
  return best;
}

/**
 * The smallest of the non-null values, or null when there is none.
 *
 * @example
 * ```ts
 * minOf([3, null, 7]); // 3
 * ```
 */
export function minOf(values: readonly (number | null)[]): number | null {
  let best: number | null = null;
  for (const v of values) if (v !== null && (best === null || v < best)) best = v;
  return best;
}

/**
 * The steady steps of the main process (`warmup: false`).
 *
 * @example
 * ```ts
 * steadySteps(readTimeline(entries)).length;
 * ```
 */
export function steadySteps(tl: Timeline): StepEntry[] {
  return mainSteps(tl).filter((s) => !s.warmup);
}

/**
 * The sampler readings taken during steady state (all readings when there is no steady step).
 *
 * @example
 * ```ts
 * steadySamples(tl, measures.steady_window).length;
 * ```
 */
export function steadySamples(tl: Timeline, window: [number, number] | null): SampleEntry[] {
  if (window === null) return tl.samples;
  const inside = tl.samples.filter((s) => s.t >= window[0] && s.t <= window[1]);
  return inside.length > 0 ? inside : tl.samples;
}

/**
 * The GPUs a job used: those whose utilization rose above 0 or whose used memory changed during the
 * run; all GPUs seen when none did.
 *
 * @example
 * ```ts
 * jobGpuIndexes(tl.samples); // [0]
 * ```
 */
export function jobGpuIndexes(samples: readonly SampleEntry[]): number[] {
  const seen = new Map<number, { util: number; min: number; max: number }>();
  for (const s of samples) {
    for (const g of s.gpus) {
      const e = seen.get(g.index) ?? { util: 0, min: Infinity, max: -Infinity };
      e.util = Math.max(e.util, g.util ?? 0, g.sm_activity ?? 0);
      if (g.used_bytes !== null) {
        e.min = Math.min(e.min, g.used_bytes);
        e.max = Math.max(e.max, g.used_bytes);
      }
      seen.set(g.index, e);
    }
  }
  const active = [...seen.entries()].filter(([, e]) => e.util > 0 || e.max - e.min > 0).map(([i]) => i);
  return (active.length > 0 ? active : [...seen.keys()]).sort((a, b) => a - b);
}

function knobValue(tl: Timeline, meta: RunMeta, name: string): { value: unknown; source: PrecisionSource } | null {
  const read = tl.events.find((e) => e.event === "knob_read" && e.details.name === name);
  if (read !== undefined && read.details.value !== undefined && read.details.value !== null) return { value: read.details.value, source: "knob_read" };
  if (name in meta.knobs) return { value: meta.knobs[name], source: "run_knobs" };
  return null;
}

function precisionInForce(tl: Timeline, meta: RunMeta): { value: string | null; source: PrecisionSource | null } {
  const fallback = [...tl.events].reverse().find((e) => e.event === "precision_fallback" && typeof e.details.to === "string");
  if (fallback !== undefined) return { value: fallback.details.to as string, source: "precision_fallback" };
  const k = knobValue(tl, meta, "precision");
  return k !== null && typeof k.value === "string" ? { value: k.value, source: k.source } : { value: null, source: null };
}

function numericKnob(tl: Timeline, meta: RunMeta, name: string): number | null {
  const k = knobValue(tl, meta, name);
  if (k === null) return null;
  const n = typeof k.value === "number" ? k.value : typeof k.value === "string" && k.value.trim() !== "" ? Number(k.value) : NaN;
  return Number.isFinite(n) ? n : null;
}

function prefer<T>(summary: RunSummary | null, key: keyof RunSummary, computed: T): T {
  const v = summary?.[key];
  return (v === null || v === undefined ? computed : v) as T;
}

/**
 * Measures a run from its metadata and timeline.
 *
 * @example
 * ```ts
 * const { meta, timeline } = await store.readRun(id);
 * const m = measureRun(meta, readTimeline(timeline));
 * m.samples_per_s; // 412.5
 * ```
 */
export function measureRun(meta: RunMeta, tl: Timeline): RunMeasures {
  const steps = mainSteps(tl);
  const steady = steps.filter((s) => !s.warmup);
  const first = minOf(steady.map(stepStart));
  const lastEnd = maxOf(steady.map((s) => s.t));
  const window: [number, number] | null = first === null || lastEnd === null ? null : [first, lastEnd];
  const busy = steady.reduce((a, s) => a + s.wait_s + s.compute_s, 0);
  const wait = steady.reduce((a, s) => a + s.wait_s, 0);
  const samples = steady.reduce((a, s) => a + s.samples, 0);
  const inWindow = steadySamples(tl, window);
  const gpuIndexes = jobGpuIndexes(tl.samples);
  const jobGpus = (s: SampleEntry) => s.gpus.filter((g) => gpuIndexes.includes(g.index));
  const utils = inWindow.flatMap((s) => jobGpus(s).map((g) => g.util)).filter((v): v is number => v !== null);
  const sm = inWindow.flatMap((s) => jobGpus(s).map((g) => g.sm_activity)).filter((v): v is number => v !== null);
  const treeCpu = inWindow.map((s) => s.tree.cpu_percent).filter((v): v is number => v !== null);
  const hostCpu = inWindow.map((s) => s.host.cpu_percent).filter((v): v is number => v !== null);
  const last = steps[steps.length - 1];
  const startT = tl.start?.t ?? tl.samples[0]?.t ?? steps[0]?.t ?? null;
  const endT = tl.end?.t ?? null;
  const precision = precisionInForce(tl, meta);
  const gpu = meta.device.backend === "cpu" || meta.device.gpus.length === 0 ? null : pickGpu(meta, gpuIndexes);
  const treeGpuPeak = maxOf(tl.samples.map((s) => s.tree.gpu_bytes));
  const summary = meta.summary;
  let limit: number | null = meta.cap_bytes;
  let limitSource: RunMeasures["memory_limit_source"] = limit === null ? null : "cap";
  if (limit === null && gpu !== null && gpu.total_bytes !== null) [limit, limitSource] = [gpu.total_bytes, "gpu_total"];
  if (limit === null && gpu === null && meta.device.host.mem_total_bytes > 0) [limit, limitSource] = [meta.device.host.mem_total_bytes, "host_total"];
  return {
    duration_s: prefer(summary, "duration_s", startT !== null && endT !== null ? endT - startT : null),
    steps: prefer(summary, "steps", tl.steps.length),
    steady_steps: prefer(summary, "steady_steps", tl.steps.filter((s) => !s.warmup).length),
    samples: prefer(summary, "samples", samples),
    samples_per_s: prefer(summary, "samples_per_s", busy > 0 ? samples / busy : null),
    data_wait_share: prefer(summary, "data_wait_share", busy > 0 ? wait / busy : null),
    step_time_s: prefer(summary, "step_time_s", median(steady.map((s) => s.wait_s + s.compute_s))),
    wait_time_s: median(steady.map((s) => s.wait_s)),
    compute_time_s: median(steady.map((s) => s.compute_s)),
    peak_tree_gpu_bytes: prefer(summary, "peak_tree_gpu_bytes", treeGpuPeak),
    peak_tree_rss_bytes: prefer(summary, "peak_tree_rss_bytes", maxOf(tl.samples.map((s) => s.tree.rss_bytes))),
    framework_peak_allocated_bytes: prefer(summary, "framework_peak_allocated_bytes", maxOf(tl.steps.map((s) => s.mem?.peak ?? null))),
    framework_peak_reserved_bytes: prefer(summary, "framework_peak_reserved_bytes", maxOf(tl.steps.map((s) => s.mem?.peak_reserved ?? null))),
    gpu_util_mean: prefer(summary, "gpu_util_mean", mean(utils)),
    sm_activity_mean: prefer(summary, "sm_activity_mean", mean(sm)),
    tree_cpu_percent_mean: mean(treeCpu),
    host_cpu_percent_mean: mean(hostCpu),
    oom_recoveries: prefer(summary, "oom_recoveries", tl.events.filter((e) => e.event === "oom_recovered").length),
    micro_batch: prefer(summary, "micro_batch", last?.micro_batch ?? null),
    accumulation: prefer(summary, "accumulation", last?.accumulation ?? null),
    precision: precision.value,
    precision_source: precision.source,
    num_workers: numericKnob(tl, meta, "num_workers"),
    steady_window: window,
    memory_limit_bytes: limit,
    memory_limit_source: limitSource,
    gpu,
    gpu_indexes: gpuIndexes,
    host_cpus: meta.device.host.cpus > 0 ? meta.device.host.cpus : null,
  };
}

function pickGpu(meta: RunMeta, indexes: number[]): GpuFacts | null {
  const used = meta.device.gpus.find((g) => indexes.includes(g.index)) ?? meta.device.gpus[0];
  return used === undefined ? null : gpuFacts(used.name, used.total_bytes > 0 ? used.total_bytes : null);
}
