/**
 * The numbers of a run, by the definitions of the timeline model (src/record/timeline/index.ts), with
 * what the analysis adds: precision, loader workers, memory limit and the card's facts.
 *
 * @module
 */
import type { RunMeta, RunSummary } from "../record/types.ts";
import { isGpuRun, summaryOf, type Timeline } from "../record/timeline/index.ts";
import { gpuFacts, type GpuFacts } from "./gpu.ts";

/**
 * Where the precision in force was read from.
 *
 * @example
 * ```ts
 * const from: PrecisionSource = "knob_read";
 * ```
 */
export type PrecisionSource = "knob_read" | "run_knobs" | "precision_fallback" | "steps";

/**
 * A run's measured numbers: its summary (by the same definitions, from the same timeline) and what
 * the analysis adds. `null` where nothing measured it.
 *
 * @example
 * ```ts
 * const m: RunMeasures = measureRun(meta, readTimeline(entries));
 * m.samples_per_s; // 412.5
 * ```
 */
export interface RunMeasures extends Omit<RunSummary, "duration_s"> {
  /** null while a run has no end */
  duration_s: number | null;
  /** medians over the steady steps of the main process */
  wait_time_s: number | null;
  compute_time_s: number | null;
  /** mean CPU use of the job's process tree over steady state, 100 = one core */
  tree_cpu_percent_mean: number | null;
  host_cpu_percent_mean: number | null;
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
  if (k !== null && typeof k.value === "string") return { value: k.value, source: k.source };
  // what the framework ran the main process's steps in, as the attach saw it (autocast, else the parameters' dtype)
  const counts = new Map<string, number>();
  for (const s of tl.steps) if (s.pid === tl.mainPid && !s.warmup && s.precision !== null) counts.set(s.precision, (counts.get(s.precision) ?? 0) + 1);
  const seen = [...counts.entries()].sort((a, b) => b[1] - a[1])[0];
  return seen !== undefined ? { value: seen[0], source: "steps" } : { value: null, source: null };
}

function numericKnob(tl: Timeline, meta: RunMeta, name: string): number | null {
  const k = knobValue(tl, meta, name);
  if (k === null) return null;
  const n = typeof k.value === "number" ? k.value : typeof k.value === "string" && k.value.trim() !== "" ? Number(k.value) : NaN;
  return Number.isFinite(n) ? n : null;
}

/**
 * Measures a run from its metadata and timeline.
 *
 * @example
 * ```ts
 * const { meta, timeline } = await loadRun(store, id);
 * const m = measureRun(meta, timeline);
 * m.samples_per_s; // 412.5
 * ```
 */
export function measureRun(meta: RunMeta, tl: Timeline): RunMeasures {
  const recorded = meta.summary;
  // The guard saw every reading (the timeline keeps two a second) and timed the job itself: those
  // are inputs of the summary the timeline alone cannot give.
  const peaks = { treeGpuBytes: recorded?.peak_tree_gpu_bytes ?? null, treeRssBytes: recorded?.peak_tree_rss_bytes ?? null };
  const startT = tl.start?.t ?? tl.samples[0]?.t ?? tl.steps[0]?.t ?? null;
  const duration = recorded?.duration_s ?? (startT !== null && tl.end !== null ? tl.end.t - startT : null);
  // A timeline read in parts measures only those parts: the recorded summary is the same
  // definitions over the whole file.
  const summary = tl.sampled && recorded !== null ? recorded : summaryOf(tl, peaks, duration ?? 0);
  const m = tl.measured;
  const precision = precisionInForce(tl, meta);
  const gpu = isGpuRun(meta) ? pickGpu(meta, m.gpu_indexes) : null;
  let limit: number | null = meta.cap_bytes;
  let limitSource: RunMeasures["memory_limit_source"] = limit === null ? null : "cap";
  if (limit === null && gpu !== null && gpu.total_bytes !== null) [limit, limitSource] = [gpu.total_bytes, "gpu_total"];
  if (limit === null && gpu === null && meta.device.host.mem_total_bytes > 0) [limit, limitSource] = [meta.device.host.mem_total_bytes, "host_total"];
  return {
    ...summary,
    duration_s: duration,
    wait_time_s: m.wait_time_s,
    compute_time_s: m.compute_time_s,
    tree_cpu_percent_mean: m.tree_cpu_percent_mean,
    host_cpu_percent_mean: m.host_cpu_percent_mean,
    precision: precision.value,
    precision_source: precision.source,
    num_workers: numericKnob(tl, meta, "num_workers"),
    steady_window: m.steady_window,
    memory_limit_bytes: limit,
    memory_limit_source: limitSource,
    gpu,
    gpu_indexes: m.gpu_indexes,
    host_cpus: meta.device.host.cpus > 0 ? meta.device.host.cpus : null,
  };
}

function pickGpu(meta: RunMeta, indexes: number[]): GpuFacts | null {
  const used = meta.device.gpus.find((g) => indexes.includes(g.index)) ?? meta.device.gpus[0];
  return used === undefined ? null : gpuFacts(used.name, used.total_bytes > 0 ? used.total_bytes : null);
}
