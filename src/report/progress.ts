/**
 * Training progress charts — loss and throughput on a step axis (or time) — for one run or several
 * overlaid (a run and the one it is compared with), and the knobs that differ between two runs.
 * Pure: built from recorded timelines only.
 *
 * @module
 */
import { measureRun } from "../analyze/measure.ts";
import { mainSteps, MODEL_SAMPLES_FIELD, stepSeconds, type Timeline } from "../record/timeline/index.ts";
import type { RunMeta } from "../record/types.ts";
import { runCharts, timeOrigin } from "./charts.ts";
import type { ChartSpec, Series } from "./svg.ts";

/** One run as the progress charts see it; `label` names its series ("this run", "vs 2026…"). */
export interface ProgressRun {
  label: string;
  meta: RunMeta;
  timeline: Timeline;
}

/** The x axis of the progress charts: the step, the samples seen so far, or the time since start. */
export type ProgressAxis = "step" | "samples" | "time";

/**
 * The progress axes by their names in a URL (`?x=samples`); anything else is the step.
 *
 * @example
 * ```ts
 * progressAxis("samples"); // "samples"
 * progressAxis(null); // "step"
 * ```
 */
export function progressAxis(text: string | null | undefined): ProgressAxis {
  return text === "time" || text === "samples" ? text : "step";
}

// Okabe–Ito, as the other charts: the first run blue, the compared one orange, then the rest of the palette
const COLORS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442"];

const AXIS_X = {
  step: { label: "step", kind: "number" as const, min: 0 },
  samples: { label: "samples seen", kind: "number" as const, min: 0 },
  time: { label: "time since start", kind: "time" as const, min: 0 },
};
const AXIS_BY = { step: "by step", samples: "by samples seen", time: "over time" };

/** Each main-process step with its x on the axis: the step, the samples seen up to it (warm-up included), or seconds since start. */
function stepsOn(run: ProgressRun, axis: ProgressAxis): { x: number; step: ReturnType<typeof mainSteps>[number] }[] {
  const t0 = timeOrigin(run.meta, run.timeline);
  let seen = 0;
  return mainSteps(run.timeline).map((step) => {
    seen += step.samples ?? 0;
    return { x: axis === "step" ? step.step : axis === "samples" ? seen : step.t - t0, step };
  });
}
const MAX_POINTS = 600;

function thin<T>(items: readonly T[]): T[] {
  if (items.length <= MAX_POINTS) return [...items];
  const every = items.length / MAX_POINTS;
  const out: T[] = [];
  for (let i = 0; i < MAX_POINTS; i++) out.push(items[Math.floor(i * every)] as T);
  out.push(items[items.length - 1] as T);
  return out;
}

/** A colour mixed with 65 % white: raw values under their smoothed line. */
function faint(hex: string): string {
  const mix = (i: number): string =>
    Math.round(parseInt(hex.slice(i, i + 2), 16) * 0.35 + 255 * 0.65)
      .toString(16)
      .padStart(2, "0");
  return `#${mix(1)}${mix(3)}${mix(5)}`;
}

function numericLoss(loss: number | string | null): number | null {
  const v = typeof loss === "string" ? Number(loss) : loss;
  return v !== null && Number.isFinite(v) ? v : null;
}

/** The smoothing of the loss line: TensorBoard's default weight, and the same de-biased moving average. */
export const LOSS_SMOOTHING = 0.6;
/** Above this many decades between the smallest and largest loss, the loss axis is logarithmic. */
export const LOG_DECADES = 1.5;

/**
 * An exponential moving average that starts unbiased (TensorBoard's scalar smoothing): `weight` 0
 * is the raw series, 0.99 nearly flat. Points with `y: null` are passed over.
 *
 * @example
 * ```ts
 * smoothPoints([[0, 10], [1, 0]], 0.5); // [[0, 10], [1, 3.33…]]
 * ```
 */
export function smoothPoints(points: readonly (readonly [number, number | null])[], weight: number): [number, number][] {
  const out: [number, number][] = [];
  let last = 0;
  let n = 0;
  for (const [x, y] of points) {
    if (y === null || !Number.isFinite(y)) continue;
    last = last * weight + (1 - weight) * y;
    n++;
    out.push([x, weight > 0 ? last / (1 - weight ** n) : y]);
  }
  return out;
}

/**
 * Whether a loss axis should be logarithmic: every value positive and more than `LOG_DECADES`
 * decades between the smallest and the largest.
 *
 * @example
 * ```ts
 * lossScale([[0, 8], [100, 0.05]]); // "log10"
 * ```
 */
export function lossScale(points: readonly (readonly [number, number | null])[]): "linear" | "log10" {
  const ys = points.map((p) => p[1]).filter((y): y is number => y !== null && Number.isFinite(y));
  if (ys.length < 2 || ys.some((y) => y <= 0)) return "linear";
  return Math.log10(Math.max(...ys) / Math.min(...ys)) > LOG_DECADES ? "log10" : "linear";
}

/**
 * How the loss chart is drawn: the smoothing weight (default `LOSS_SMOOTHING`) and the y scale
 * (default: `lossScale` of the losses).
 *
 * @example
 * ```ts
 * const options: LossOptions = { smoothing: 0.9, scale: "linear" };
 * ```
 */
export interface LossOptions {
  smoothing?: number;
  scale?: "linear" | "log10";
}

/**
 * The loss chart: each run's raw losses as faint points and its smoothed line over them, on a log
 * axis when the loss spans decades; null when no run reported a loss.
 *
 * @example
 * ```ts
 * lossChart([{ label: "this run", meta, timeline }])?.y.scale; // "log10" for a loss from 8 to 0.05
 * ```
 */
export function lossChart(runs: readonly ProgressRun[], axis: ProgressAxis = "step", options: LossOptions = {}): ChartSpec | null {
  return scalarChart(runs, axis, options, { id: "loss", label: "loss", title: "Loss", read: (step) => numericLoss(step.loss) });
}

/** A scalar per step drawn as the loss is: raw points under a smoothed line, log scale when it spans decades. */
function scalarChart(
  runs: readonly ProgressRun[],
  axis: ProgressAxis,
  options: LossOptions,
  what: { id: string; label: string; title: string; read: (step: ReturnType<typeof mainSteps>[number]) => number | null },
): ChartSpec | null {
  const smoothing = options.smoothing ?? LOSS_SMOOTHING;
  const series: Series[] = [];
  const all: [number, number | null][] = [];
  runs.forEach((run, i) => {
    const color = COLORS[i % COLORS.length] as string;
    const name = (text: string): string => (runs.length > 1 ? `${run.label}: ${text}` : text);
    const raw = stepsOn(run, axis)
      .map(({ x, step }): [number, number | null] => [x, what.read(step)])
      .filter((p) => p[1] !== null);
    if (raw.length === 0) return;
    all.push(...raw);
    series.push({ name: name(what.label), color: faint(color), style: "points", points: thin(raw) });
    series.push({ name: name(`${what.label}, smoothed`), color, points: thin(smoothPoints(raw, smoothing)) });
  });
  if (series.length === 0) return null;
  const scale = options.scale ?? lossScale(all);
  return {
    id: what.id,
    title: `${what.title} ${AXIS_BY[axis]}${scale === "log10" ? " (log scale)" : ""}`,
    x: AXIS_X[axis],
    y: { label: what.label, kind: "number", scale },
    series,
    empty: `no ${what.label} reported`,
  };
}

/** At most this many charts of the job's own scalars. */
export const MAX_METRIC_CHARTS = 8;

/**
 * The job's own logged scalars (Lightning's `self.log`, the HF Trainer's log, `brim.log` fields), one
 * chart each, in the order they first appear, drawn as the loss is; ids `metric-<name>`.
 *
 * @example
 * ```ts
 * metricCharts([{ label: "this run", meta, timeline }]).map((c) => c.id); // ["metric-train_loss", "metric-learning_rate"]
 * ```
 */
export function metricCharts(runs: readonly ProgressRun[], axis: ProgressAxis = "step", options: LossOptions = {}): ChartSpec[] {
  const names: string[] = [];
  for (const run of runs)
    for (const step of mainSteps(run.timeline))
      for (const name of Object.keys(step.metrics ?? {})) if (name !== MODEL_SAMPLES_FIELD && !names.includes(name)) names.push(name);
  return names
    .slice(0, MAX_METRIC_CHARTS)
    .map((name) =>
      scalarChart(
        runs,
        axis,
        { smoothing: options.smoothing },
        { id: `metric-${name.replace(/[^\w.-]/g, "_")}`, label: name, title: `${name} (logged by the job)`, read: (step) => step.metrics?.[name] ?? null },
      ),
    )
    .filter((chart): chart is ChartSpec => chart !== null);
}

/**
 * Loss and throughput against the step number (`axis: "step"`), the samples seen so far or the time
 * since start, one series per run; throughput leaves warm-up steps out, as every brim number does.
 *
 * @example
 * ```ts
 * progressCharts([{ label: "this run", meta, timeline }], "step").map((c) => c.id); // ["loss", "throughput_steps"]
 * ```
 */
export function progressCharts(runs: readonly ProgressRun[], axis: ProgressAxis = "step", lossOptions: LossOptions = {}): ChartSpec[] {
  const x = AXIS_X[axis];
  const loss: Series[] = [];
  const rate: Series[] = [];
  runs.forEach((run, i) => {
    const color = COLORS[i % COLORS.length] as string;
    const name = (what: string): string => (runs.length > 1 ? `${run.label}: ${what}` : what);
    loss.push({ name: name("loss"), color, points: [] });
    rate.push({
      name: name("samples/s"),
      color,
      points: thin(
        stepsOn(run, axis)
          .filter(({ step }) => !step.warmup)
          .map(({ x: at, step }) => {
            const seconds = stepSeconds(step);
            return [at, seconds !== null && seconds > 0 && step.samples !== null ? step.samples / seconds : null];
          }),
      ),
    });
  });
  const by = AXIS_BY[axis];
  return [
    lossChart(runs, axis, lossOptions) ?? {
      id: "loss",
      title: `Loss ${by}`,
      x,
      y: { label: "loss", kind: "number" },
      series: loss,
      empty: "no loss reported (none went backward as a scalar tensor, and none was logged through the SDK)",
    },
    {
      id: "throughput_steps",
      title: `Throughput ${by}`,
      x,
      y: { label: "samples per second", kind: "number", min: 0 },
      series: rate,
      empty: "no step reports",
    },
    ...metricCharts(runs, axis, { smoothing: lossOptions.smoothing }),
  ];
}

/** One difference between two runs' settings. */
export interface KnobDifference {
  name: string;
  a: string;
  b: string;
}

/**
 * What differs between two runs' settings: knob values, cap, step budget, command (`a` is the first
 * run's, `b` the second's; "–" where one run has none).
 *
 * @example
 * ```ts
 * knobDifferences(before, after); // [{ name: "batch_size", a: "32", b: "256" }, { name: "precision", a: "fp32", b: "bf16-mixed" }]
 * ```
 */
export function knobDifferences(a: RunMeta, b: RunMeta): KnobDifference[] {
  const out: KnobDifference[] = [];
  const show = (v: number | string | boolean | null | undefined): string => (v === undefined || v === null ? "–" : String(v));
  for (const name of [...new Set([...Object.keys(a.knobs), ...Object.keys(b.knobs)])].sort()) {
    if (a.knobs[name] !== b.knobs[name]) out.push({ name, a: show(a.knobs[name]), b: show(b.knobs[name]) });
  }
  if (a.cap_bytes !== b.cap_bytes) out.push({ name: "cap bytes", a: show(a.cap_bytes), b: show(b.cap_bytes) });
  if (a.step_budget !== b.step_budget) out.push({ name: "step budget", a: show(a.step_budget), b: show(b.step_budget) });
  const ca = a.command.join(" ");
  const cb = b.command.join(" ");
  if (ca !== cb) out.push({ name: "command", a: ca, b: cb });
  return out;
}

/**
 * Every run chart with a second run overlaid: the first run's series as they are, the second's dashed
 * in their own colours, each named by its run (both on time since their own start), then loss and
 * throughput by step for both.
 *
 * @example
 * ```ts
 * overlayRunCharts({ label: "after", meta, timeline }, { label: "before", meta: b.meta, timeline: b.timeline }).map((c) => c.id);
 * // ["utilization", "memory", "throughput", "data_wait", "loss", "throughput_steps"]
 * ```
 */
export function overlayRunCharts(run: ProgressRun, vs: ProgressRun): ChartSpec[] {
  const charts = (r: ProgressRun): ChartSpec[] => {
    const tl = r.timeline;
    return runCharts(r.meta, tl, measureRun(r.meta, tl));
  };
  const theirs = new Map(charts(vs).map((c) => [c.id, c]));
  const overlaid = charts(run).map((mine): ChartSpec => {
    const other = theirs.get(mine.id);
    if (other === undefined) return mine;
    const named = (series: readonly Series[], label: string, offset: number, dashed: boolean): Series[] =>
      series.map((s, i) => ({
        ...s,
        name: `${label}: ${s.name}`,
        color: s.color ?? COLORS[(offset + i) % COLORS.length],
        ...(dashed && (s.style === undefined || s.style === "line" || s.style === "line+points") ? { style: "dashed" as const } : {}),
      }));
    return {
      ...mine,
      series: [...named(mine.series, run.label, 0, false), ...named(other.series, vs.label, mine.series.length, true)],
      lines: [
        ...(mine.lines ?? []),
        ...(other.lines ?? [])
          .filter((l) => !(mine.lines ?? []).some((m) => m.axis === l.axis && m.value === l.value))
          .map((l) => ({ ...l, label: `${vs.label}: ${l.label}`, color: "#999999" })),
      ],
    };
  });
  return [...overlaid, ...progressCharts([run, vs], "step")];
}
