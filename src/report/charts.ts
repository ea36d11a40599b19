/**
 * The charts of a run and of a tune, as {@link ChartSpec}s built from recorded values only. Pure.
 *
 * @module
 */
import { formatBytes } from "../bytes.ts";
import type { RunMeasures } from "../analyze/measure.ts";
import { maxOf, minOf } from "../stats.ts";
import { formatRate, formatShare } from "../format.ts";
import { MICRO_BATCH_NAMES } from "../knobs/index.ts";
import { isGpuRun, mainSteps, stepSeconds, stepStart, type StepEntry, type Timeline } from "../record/timeline/index.ts";
import type { RunMeta, TuneRecord } from "../record/types.ts";
import type { Band, ChartSpec, Point, RefLine, Series } from "./svg.ts";

/**
 * The run charts by id, in the order reports show them.
 *
 * @example
 * ```ts
 * RUN_CHARTS.map((id) => `charts/${id}.svg`);
 * ```
 */
export const RUN_CHARTS = ["utilization", "memory", "throughput", "data_wait"] as const;

/** How far past the largest trial's micro-batch the memory chart reaches to show the predicted limit. */
const CHART_REACH = 4;
/** A cap more than this many times the largest peak on the chart is named in the title, not drawn. */
const CAP_FAR = 8;

/**
 * The tune charts by id.
 *
 * @example
 * ```ts
 * TUNE_CHARTS.includes("tune_memory"); // true
 * ```
 */
export const TUNE_CHARTS = ["tune_throughput", "tune_memory"] as const;

/**
 * The time a run's charts count from: the job's start, else its first entry.
 *
 * @example
 * ```ts
 * timeOrigin(meta, tl); // 1763780000.1
 * ```
 */
export function timeOrigin(meta: RunMeta, tl: Timeline): number {
  const started = Date.parse(meta.started_at) / 1000;
  return tl.start?.t ?? tl.samples[0]?.t ?? tl.steps[0]?.t ?? (Number.isFinite(started) ? started : 0);
}

/**
 * Utilization and SM activity of the job's GPUs over time; for a CPU run, the CPU use of the job's
 * process tree in cores.
 *
 * @example
 * ```ts
 * renderChart(utilizationChart(meta, tl, measures));
 * ```
 */
export function utilizationChart(meta: RunMeta, tl: Timeline, m: RunMeasures): ChartSpec {
  const t0 = timeOrigin(meta, tl);
  if (!isGpuRun(meta)) {
    const series: Series[] = [
      { name: "CPU of the job's processes", points: tl.samples.map((s) => [s.t - t0, s.tree.cpu_percent === null ? null : s.tree.cpu_percent / 100]) },
    ];
    if (tl.samples.some((s) => s.host.cpu_percent !== null) && m.host_cpus !== null) {
      const cpus = m.host_cpus;
      series.push({
        name: "whole host",
        style: "dashed",
        points: tl.samples.map((s) => [s.t - t0, s.host.cpu_percent === null ? null : (s.host.cpu_percent / 100) * cpus]),
      });
    }
    return {
      id: "utilization",
      title: "CPU use (no GPU in this run)",
      x: { label: "time since start", kind: "time", min: 0 },
      y: { label: "cores busy", kind: "number", min: 0 },
      series,
      lines: m.host_cpus !== null ? [{ axis: "y", value: m.host_cpus, label: `${m.host_cpus} cores`, color: "#555" }] : [],
      empty: "no sampler readings",
    };
  }
  const series: Series[] = [];
  const many = m.gpu_indexes.length > 1;
  m.gpu_indexes.forEach((index) => {
    const name = many ? `GPU ${index} ` : "";
    const util: Point[] = [];
    const sm: Point[] = [];
    for (const s of tl.samples) {
      const g = s.gpus.find((r) => r.index === index);
      if (g === undefined) continue;
      util.push([s.t - t0, g.util]);
      sm.push([s.t - t0, g.sm_activity]);
    }
    series.push({ name: `${name}utilization`, points: util });
    if (sm.some((p) => p[1] !== null)) series.push({ name: `${name}SM activity`, points: sm });
  });
  return {
    id: "utilization",
    title: "GPU utilization and SM activity",
    x: { label: "time since start", kind: "time", min: 0 },
    y: { label: "percent", kind: "percent", min: 0, max: 100 },
    series,
    empty: "no GPU readings",
  };
}

/**
 * Memory against the cap: the process tree's GPU memory (NVML) and PyTorch's allocated/reserved
 * memory for a GPU run; the tree's RSS for a CPU run.
 *
 * @example
 * ```ts
 * memoryChart(meta, tl, measures).lines; // [{ axis: "y", value: capBytes, label: "cap 12.0 GiB" }, ...]
 * ```
 */
export function memoryChart(meta: RunMeta, tl: Timeline, m: RunMeasures): ChartSpec {
  const t0 = timeOrigin(meta, tl);
  const lines: RefLine[] = [];
  const series: Series[] = [];
  if (isGpuRun(meta)) {
    if (tl.samples.some((s) => s.tree.gpu_bytes !== null)) {
      series.push({ name: "job's processes (NVML)", points: tl.samples.map((s) => [s.t - t0, s.tree.gpu_bytes]) });
    } else {
      for (const index of m.gpu_indexes) {
        series.push({
          name: `GPU ${index} used (all processes)`,
          points: tl.samples.map((s) => [s.t - t0, s.gpus.find((g) => g.index === index)?.used_bytes ?? null]),
        });
      }
    }
    const steps = mainSteps(tl).filter((s) => s.mem !== null && s.mem.device !== "cpu");
    if (steps.some((s) => s.mem?.reserved !== null))
      series.push({ name: "PyTorch reserved", style: "dashed", points: steps.map((s) => [s.t - t0, s.mem?.reserved ?? null]) });
    if (steps.some((s) => s.mem?.allocated !== null))
      series.push({ name: "PyTorch allocated", points: steps.map((s) => [s.t - t0, s.mem?.allocated ?? null]) });
    if (meta.cap_bytes !== null && meta.cap_scope === "gpu") lines.push({ axis: "y", value: meta.cap_bytes, label: `cap ${formatBytes(meta.cap_bytes)}` });
    if (m.gpu?.total_bytes != null) lines.push({ axis: "y", value: m.gpu.total_bytes, label: `card ${formatBytes(m.gpu.total_bytes)}`, color: "#555" });
  } else {
    series.push({ name: "RSS of the job's processes", points: tl.samples.map((s) => [s.t - t0, s.tree.rss_bytes]) });
    if (meta.cap_bytes !== null) lines.push({ axis: "y", value: meta.cap_bytes, label: `cap ${formatBytes(meta.cap_bytes)}` });
  }
  return {
    id: "memory",
    title: `${isGpuRun(meta) ? "GPU memory" : "RAM (RSS; the summary's peak is PSS)"}${lines.some((l) => l.label.startsWith("cap ")) ? " against the cap" : ""}`,
    x: { label: "time since start", kind: "time", min: 0 },
    y: { label: "memory", kind: "bytes", min: 0 },
    series,
    lines,
    empty: "no memory readings",
  };
}

/** Steps grouped in time windows: throughput and data wait per window, so long runs stay readable. */
function windows(steps: readonly StepEntry[], t0: number, target = 150): { t: number; samples: number; wait: number; busy: number }[] {
  if (steps.length === 0) return [];
  const span = (steps[steps.length - 1]?.t ?? t0) - stepStart(steps[0] as StepEntry);
  const width = steps.length <= target ? 0 : span / target;
  const out: { t: number; samples: number; wait: number; busy: number }[] = [];
  let cur: { t: number; samples: number; wait: number; busy: number } | null = null;
  let edge = -Infinity;
  for (const s of steps) {
    const seconds = stepSeconds(s);
    if (seconds === null) continue;
    if (cur === null || s.t > edge) {
      if (cur !== null) out.push(cur);
      cur = { t: s.t - t0, samples: 0, wait: 0, busy: 0 };
      edge = s.t + width;
    }
    cur.t = s.t - t0;
    cur.samples += s.samples ?? 0;
    cur.wait += s.wait_s ?? 0;
    cur.busy += seconds;
  }
  if (cur !== null) out.push(cur);
  return out;
}

/**
 * Throughput over time: samples per second of the main process's steps (grouped in windows on long
 * runs), warm-up steps apart, with the steady-state mean.
 *
 * @example
 * ```ts
 * throughputChart(meta, tl, measures).series[0]?.name; // "samples/s"
 * ```
 */
export function throughputChart(meta: RunMeta, tl: Timeline, m: RunMeasures): ChartSpec {
  const t0 = timeOrigin(meta, tl);
  const steps = mainSteps(tl);
  const steady = windows(
    steps.filter((s) => !s.warmup),
    t0,
  );
  const warm = windows(
    steps.filter((s) => s.warmup),
    t0,
  );
  const series: Series[] = [{ name: "samples/s", style: "line+points", points: steady.map((w) => [w.t, w.busy > 0 ? w.samples / w.busy : null]) }];
  if (warm.length > 0)
    series.push({ name: "warm-up", style: "points", color: "#999999", points: warm.map((w) => [w.t, w.busy > 0 ? w.samples / w.busy : null]) });
  return {
    id: "throughput",
    title: "Throughput over time",
    x: { label: "time since start", kind: "time", min: 0 },
    y: { label: "samples per second", kind: "number", min: 0 },
    series,
    lines: m.samples_per_s !== null ? [{ axis: "y", value: m.samples_per_s, label: `steady mean ${formatRate(m.samples_per_s)}/s`, color: "#333" }] : [],
    empty: "no step reports (wrap the loader in brim.track)",
  };
}

/**
 * Data wait over time: the share of step time spent waiting for the next batch, with the run's share.
 *
 * @example
 * ```ts
 * dataWaitChart(meta, tl, measures).y.max; // 100
 * ```
 */
export function dataWaitChart(meta: RunMeta, tl: Timeline, m: RunMeasures): ChartSpec {
  const t0 = timeOrigin(meta, tl);
  const steps = windows(
    mainSteps(tl).filter((s) => !s.warmup),
    t0,
  );
  return {
    id: "data_wait",
    title: "Waiting for data (share of step time)",
    x: { label: "time since start", kind: "time", min: 0 },
    y: { label: "percent of step time", kind: "percent", min: 0, max: 100 },
    series: [{ name: "data wait", color: "#D55E00", style: "line+points", points: steps.map((w) => [w.t, w.busy > 0 ? (100 * w.wait) / w.busy : null]) }],
    lines: m.data_wait_share !== null ? [{ axis: "y", value: 100 * m.data_wait_share, label: `run: ${formatShare(m.data_wait_share)}`, color: "#333" }] : [],
    empty: "no step reports (wrap the loader in brim.track)",
  };
}

/**
 * The four run charts.
 *
 * @example
 * ```ts
 * runCharts(meta, tl, measures).map((c) => c.id); // ["utilization", "memory", "throughput", "data_wait"]
 * ```
 */
export function runCharts(meta: RunMeta, tl: Timeline, m: RunMeasures): ChartSpec[] {
  return [utilizationChart(meta, tl, m), memoryChart(meta, tl, m), throughputChart(meta, tl, m), dataWaitChart(meta, tl, m)];
}

/**
 * A trial as the tune charts see it.
 *
 * @example
 * ```ts
 * trialPoints(tune).filter((p: TrialPoint) => p.ok).map((p) => [p.micro_batch, p.samples_per_s]);
 * ```
 */
export interface TrialPoint {
  index: number;
  micro_batch: number | null;
  knobs: Record<string, number | string | boolean>;
  ok: boolean;
  end: string;
  samples_per_s: number | null;
  peak_bytes: number | null;
  winner: boolean;
}

/**
 * The knob of a tune that sets the micro-batch, if any.
 *
 * @example
 * ```ts
 * microBatchKnob(tune); // "batch_size"
 * ```
 */
export function microBatchKnob(tune: TuneRecord): string | null {
  return MICRO_BATCH_NAMES.find((k) => tune.trials.some((t) => typeof t.knobs[k] === "number")) ?? null;
}

/**
 * The trials of a tune as chart points. `microBatches` gives the micro-batch each trial's run
 * reported (by trial index), used where the knobs do not say.
 *
 * @example
 * ```ts
 * trialPoints(tune, new Map([[0, 32]]));
 * ```
 */
export function trialPoints(tune: TuneRecord, microBatches: ReadonlyMap<number, number> = new Map()): TrialPoint[] {
  const knob = microBatchKnob(tune);
  // A trial records the knobs it changed; the rest are the baseline's.
  const base = (tune.trials.find((t) => t.purpose === "baseline") ?? tune.trials[0])?.knobs ?? {};
  return tune.trials.map((t) => {
    const knobs = { ...base, ...t.knobs };
    const fromKnob = knob !== null && typeof knobs[knob] === "number" ? knobs[knob] : null;
    return {
      index: t.index,
      micro_batch: fromKnob ?? microBatches.get(t.index) ?? null,
      knobs,
      ok: t.end === "ok",
      end: t.end,
      samples_per_s: t.samples_per_s,
      peak_bytes: t.peak_bytes,
      winner: tune.winner?.index === t.index,
    };
  });
}

function groupLabel(knobs: Record<string, number | string | boolean>, varying: ReadonlySet<string>): string {
  const parts = Object.entries(knobs)
    .filter(([k]) => varying.has(k))
    .map(([k, v]) => `${k}=${String(v)}`);
  return parts.length === 0 ? "trials" : parts.join(", ");
}

/** The knobs other than `skip` that take more than one value over the trials. */
function varyingKnobs(points: readonly TrialPoint[], skip: string | null): Set<string> {
  const values = new Map<string, Set<string>>();
  for (const p of points) for (const [k, v] of Object.entries(p.knobs)) if (k !== skip) values.set(k, (values.get(k) ?? new Set()).add(String(v)));
  return new Set([...values.entries()].filter(([, vs]) => vs.size > 1).map(([k]) => k));
}

/**
 * Throughput against micro-batch, one line per combination of the other knobs; failed trials as ✕.
 *
 * @example
 * ```ts
 * renderChart(tuneThroughputChart(tune, points));
 * ```
 */
export function tuneThroughputChart(tune: TuneRecord, points: readonly TrialPoint[]): ChartSpec {
  const knob = microBatchKnob(tune);
  const byMb = points.some((p) => p.micro_batch !== null);
  const x = (p: TrialPoint): number => (byMb ? (p.micro_batch ?? 0) : p.index);
  const groups = new Map<string, TrialPoint[]>();
  const varying = varyingKnobs(points, knob);
  for (const p of points.filter((q) => q.ok && q.samples_per_s !== null && (!byMb || q.micro_batch !== null))) {
    const key = groupLabel(p.knobs, varying);
    groups.set(key, [...(groups.get(key) ?? []), p]);
  }
  const series: Series[] = [...groups.entries()].map(([name, ps]) => ({
    name,
    style: "line+points" as const,
    points: ps.sort((a, b) => x(a) - x(b)).map((p) => [x(p), p.samples_per_s] as Point),
  }));
  const winner = points.find((p) => p.winner && p.samples_per_s !== null);
  if (winner !== undefined) series.push({ name: "winner", style: "points", color: "#009E73", points: [[x(winner), winner.samples_per_s]] });
  const failed = points.filter((p) => !p.ok && (!byMb || p.micro_batch !== null));
  if (failed.length > 0) series.push({ name: "failed (OOM or crash)", style: "cross", color: "#C62828", points: failed.map((p) => [x(p), 0] as Point) });
  const mbs = points.map((p) => p.micro_batch).filter((v): v is number => v !== null && v > 0);
  const hi = maxOf(mbs);
  const lo = minOf(mbs);
  const log = byMb && hi !== null && lo !== null && hi / lo >= 4;
  const bands = noiseBands(tune);
  return {
    id: "tune_throughput",
    title: byMb ? "Throughput against micro-batch" : "Throughput per trial",
    x: { label: byMb ? `micro-batch${knob !== null ? ` (${knob})` : ""}` : "trial", kind: "number", scale: log ? "log2" : "linear" },
    y: { label: "samples per second", kind: "number", min: 0 },
    series,
    ...(bands.length > 0 ? { bands } : {}),
    empty: "no trial finished",
  };
}

/**
 * The noise the verdict rests on, as bands on the throughput chart: the spread (lowest to highest) of
 * the baseline's and the winner's interleaved confirmation runs; without a confirmation, the search's
 * noise of one trial around trial 0 (your configuration).
 *
 * @example
 * ```ts
 * noiseBands(tune).map((b) => b.label); // ["your configuration: 3 interleaved runs, 401–415", "winner: 3 interleaved runs, 452–470"]
 * ```
 */
export function noiseBands(tune: TuneRecord): Band[] {
  const spread = (rates: readonly number[], who: string, color: string): Band[] =>
    rates.length === 0
      ? []
      : [
          {
            low: Math.min(...rates),
            high: Math.max(...rates),
            label: `${who}: ${rates.length} interleaved runs, ${formatRate(Math.min(...rates))}–${formatRate(Math.max(...rates))}`,
            color,
          },
        ];
  const c = tune.confirmation;
  if (c != null && (c.baseline_rates.length > 0 || c.winner_rates.length > 0))
    return [...spread(c.baseline_rates, "your configuration", "#555555"), ...spread(c.winner_rates, "winner", "#009E73")];
  const base = tune.trials.find((t) => t.index === 0)?.samples_per_s ?? null;
  if (base === null || tune.noise === undefined || !(tune.noise > 0)) return [];
  return [
    {
      low: base * (1 - tune.noise),
      high: base * (1 + tune.noise),
      label: `±${(tune.noise * 100).toFixed(1)} % noise of one trial, around your configuration`,
      color: "#555555",
    },
  ];
}

/**
 * Peak memory against micro-batch, with the cap, the cap less the margin, the memory line the tune
 * fitted (intercept + bytes per sample × micro-batch) and the largest micro-batch it predicts.
 *
 * @example
 * ```ts
 * tuneMemoryChart(tune, points).series.map((s) => s.name); // ["measured peak", "fitted memory line"]
 * ```
 */
export function tuneMemoryChart(tune: TuneRecord, points: readonly TrialPoint[]): ChartSpec {
  const knob = microBatchKnob(tune);
  const measured = points.filter((p) => p.micro_batch !== null && p.peak_bytes !== null);
  const mbs = points.map((p) => p.micro_batch).filter((v): v is number => v !== null && v > 0);
  const maxMb = maxOf(mbs);
  const minMb = minOf(mbs);
  const line = tune.memory_line;
  const predicted = line !== null && line.predicted_max_micro_batch > 0 ? line.predicted_max_micro_batch : null;
  // The chart reaches a little past the trials: a prediction far beyond them is named, not drawn,
  // so that the measured points stay readable.
  const xEnd = maxMb === null ? null : predicted !== null && predicted <= maxMb * CHART_REACH ? Math.max(maxMb, predicted) : line !== null ? maxMb * 2 : maxMb;
  const fitted = (v: number): number => (line === null ? 0 : line.intercept_bytes + line.bytes_per_sample * v);
  const top = maxOf([...measured.map((p) => p.peak_bytes), line !== null && xEnd !== null ? fitted(xEnd) : null]);
  const capFar = top !== null && tune.cap_bytes > CAP_FAR * top;
  const series: Series[] = [{ name: "measured peak", style: "points", points: measured.map((p) => [p.micro_batch as number, p.peak_bytes]) }];
  const lines: RefLine[] = [];
  if (!capFar) lines.push({ axis: "y", value: tune.cap_bytes, label: `cap ${formatBytes(tune.cap_bytes)}` });
  if (line !== null && xEnd !== null && minMb !== null) {
    const xs: number[] = [];
    for (let v = Math.min(1, minMb); v < xEnd; v = v * 1.25 + 0.5) xs.push(v);
    xs.push(xEnd);
    const beyond = predicted !== null && predicted > xEnd ? ` (fits ≤ ${predicted}, beyond the chart)` : "";
    series.push({ name: `fitted memory line${beyond}`, style: "dashed", color: "#555555", points: xs.map((v) => [v, fitted(v)]) });
    if (!capFar && line.margin_bytes > 0)
      lines.push({
        axis: "y",
        value: tune.cap_bytes - line.margin_bytes,
        label: `cap − margin ${formatBytes(tune.cap_bytes - line.margin_bytes)}`,
        color: "#E69F00",
      });
    if (predicted !== null && predicted <= xEnd) lines.push({ axis: "x", value: predicted, label: `fits ≤ ${predicted}`, color: "#009E73" });
  }
  const failed = points.filter((p) => !p.ok && p.micro_batch !== null);
  if (failed.length > 0)
    series.push({
      name: "failed (OOM or crash)",
      style: "cross",
      color: "#C62828",
      points: failed.map((p) => [p.micro_batch as number, capFar ? (top ?? 0) : tune.cap_bytes] as Point),
    });
  const log = maxMb !== null && minMb !== null && Math.max(maxMb, xEnd ?? 0) / minMb >= 4;
  return {
    id: "tune_memory",
    title: `Peak memory against micro-batch${capFar ? ` (the cap, ${formatBytes(tune.cap_bytes)}, is far above)` : ""}`,
    x: { label: `micro-batch${knob !== null ? ` (${knob})` : ""}`, kind: "number", scale: log ? "log2" : "linear" },
    y: { label: tune.cap_scope === "gpu" ? "peak GPU memory" : "peak RAM", kind: "bytes", min: 0 },
    series,
    lines,
    empty: "no trial recorded a micro-batch and a peak",
  };
}
