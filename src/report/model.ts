/**
 * Report models: everything a run or tune report shows, built from recorded data only. Pure; the
 * Markdown and HTML renderers and the dashboard draw from these.
 *
 * @module
 */
import { formatBytes } from "../bytes.ts";
import { compareRuns, type Comparison, type ComparedRun } from "../analyze/compare.ts";
import { diagnose, type DoctorReport } from "../analyze/doctor/index.ts";
import { formatMaybeBytes, formatPercent, formatRate, formatSeconds, formatShare } from "../format.ts";
import { measureRun, type RunMeasures } from "../analyze/measure.ts";
import type { RecordedRun } from "../record/load.ts";
import { isGpuRun } from "../record/timeline/index.ts";
import type { RunMeta, TuneRecord, TuneTrialRecord } from "../record/types.ts";
import { runCharts, trialPoints, tuneMemoryChart, tuneThroughputChart, type TrialPoint } from "./charts.ts";
import { parityLoss, parityLossChart, paritySpans, paritySpeedup } from "./parity-chart.ts";
import { lossChart, metricCharts } from "./progress.ts";
import type { ChartSpec } from "./svg.ts";

export type { RecordedRun } from "../record/load.ts";

/**
 * A labelled number of a report's headline table.
 *
 * @example
 * ```ts
 * const row: NumberRow = { label: "samples/s (steady state)", value: "412 over 37 steady steps" };
 * ```
 */
export interface NumberRow {
  label: string;
  value: string;
}

/**
 * What a run report shows.
 *
 * @example
 * ```ts
 * const model: RunReportModel = runReport(await loadRun(store, id));
 * model.charts.length; // 4, and 5 when the run has a loss
 * ```
 */
export interface RunReportModel {
  kind: "run";
  id: string;
  title: string;
  facts: NumberRow[];
  numbers: NumberRow[];
  doctor: DoctorReport;
  charts: ChartSpec[];
  comparison: Comparison | null;
}

/**
 * One row of a tune report's trial table.
 *
 * @example
 * ```ts
 * model.trials.find((t: TrialRow) => t.winner)?.knobs; // "batch_size=64"
 * ```
 */
export interface TrialRow {
  index: number;
  run_id: string | null;
  purpose: string;
  knobs: string;
  end: string;
  samples_per_s: string;
  peak: string;
  utilization: string;
  data_wait: string;
  winner: boolean;
}

/**
 * What a tune report shows.
 *
 * @example
 * ```ts
 * const model: TuneReportModel = tuneReport(await store.readTune(id));
 * model.comparison?.speedup;
 * ```
 */
export interface TuneReportModel {
  kind: "tune";
  id: string;
  title: string;
  facts: NumberRow[];
  trials: TrialRow[];
  points: TrialPoint[];
  charts: ChartSpec[];
  comparison: Comparison | null;
  notes: string[];
  /** your configuration's and the winner's losses, beside the speedup; null without a parity record with a loss */
  parity: TuneParityView | null;
}

/**
 * The loss of your configuration and of the winner, as a tune report shows it beside the speedup.
 *
 * @example
 * ```ts
 * tuneReport(tune).parity?.caption; // "effective batch 16 → 64: losses by samples seen"
 * ```
 */
export interface TuneParityView {
  caption: string;
  speedup: string | null;
  chart: ChartSpec;
  /** each run's mean loss over a few spans both reached (null when too few steps) */
  spans: ReturnType<typeof paritySpans>;
}

function tuneParity(tune: TuneRecord): TuneParityView | null {
  const view = tune.parity === undefined ? null : parityLoss(tune.parity);
  if (view === null) return null;
  return { caption: view.caption, speedup: paritySpeedup(tune), chart: parityLossChart(view), spans: paritySpans(view) };
}

function runFacts(meta: RunMeta, m: RunMeasures): NumberRow[] {
  const rows: NumberRow[] = [
    { label: "command", value: meta.command.join(" ") },
    {
      label: "device",
      value: isGpuRun(meta) ? meta.device.gpus.map((g) => `${g.name} (${formatBytes(g.total_bytes)})`).join(", ") : `CPU, ${meta.device.host.cpus} cores`,
    },
    { label: "started", value: meta.started_at },
    { label: "duration", value: formatSeconds(m.duration_s) },
    { label: "end", value: meta.end === null ? "still running (or brim stopped before recording the end)" : `${meta.end.cause}: ${meta.end.message}` },
  ];
  if (meta.cap_bytes !== null) rows.push({ label: "cap", value: `${formatBytes(meta.cap_bytes)} (${meta.cap_scope === "gpu" ? "GPU memory" : "RAM"})` });
  const tags = Object.entries(meta.tags ?? {});
  if (tags.length > 0) rows.push({ label: "tags", value: tags.map(([k, v]) => `${k}=${v}`).join(", ") });
  if (Object.keys(meta.knobs).length > 0)
    rows.push({
      label: "knobs",
      value: Object.entries(meta.knobs)
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(", "),
    });
  if (meta.kind === "trial" && meta.tune_id !== null) rows.push({ label: "tune", value: meta.tune_id });
  return rows;
}

/**
 * The headline numbers of a run, as a person reads them.
 *
 * @example
 * ```ts
 * measureRows(measures, true)[0]; // { label: "samples/s (steady state)", value: "412" }
 * ```
 */
export function measureRows(m: RunMeasures, gpu: boolean): NumberRow[] {
  const rows: NumberRow[] = [
    { label: "samples/s (steady state)", value: `${formatRate(m.samples_per_s)} over ${m.steady_steps} steady steps` },
    { label: "data wait", value: formatShare(m.data_wait_share) },
    {
      label: "step time (median)",
      value: `${formatSeconds(m.step_time_s)} (wait ${formatSeconds(m.wait_time_s)}, compute ${formatSeconds(m.compute_time_s)})`,
    },
    { label: "micro-batch × accumulation", value: `${m.micro_batch ?? "?"} × ${m.accumulation ?? "?"}` },
    { label: "precision", value: m.precision ?? "not reported" },
  ];
  if (gpu) {
    rows.push({ label: "GPU utilization (mean)", value: formatPercent(m.gpu_util_mean) });
    rows.push({ label: "SM activity (mean)", value: m.sm_activity_mean === null ? "not recorded (GPM: Hopper and newer)" : formatPercent(m.sm_activity_mean) });
    rows.push({ label: "peak GPU memory (process tree)", value: formatMaybeBytes(m.peak_tree_gpu_bytes) });
    rows.push({
      label: "PyTorch peak allocated / reserved",
      value: `${formatMaybeBytes(m.framework_peak_allocated_bytes)} / ${formatMaybeBytes(m.framework_peak_reserved_bytes)}`,
    });
  } else {
    rows.push({ label: "CPU of the job (mean, 100 % = one core)", value: formatPercent(m.tree_cpu_percent_mean) });
  }
  rows.push({ label: "peak RSS (process tree)", value: formatMaybeBytes(m.peak_tree_rss_bytes) });
  if (m.memory_limit_bytes !== null)
    rows.push({
      label: "memory limit",
      value: `${formatBytes(m.memory_limit_bytes)} (${m.memory_limit_source === "cap" ? "cap" : m.memory_limit_source === "gpu_total" ? "card" : "host"})`,
    });
  if (m.oom_recoveries > 0) rows.push({ label: "out-of-memory recoveries", value: String(m.oom_recoveries) });
  return rows;
}

/**
 * The side of a comparison a recorded run gives.
 *
 * @example
 * ```ts
 * comparedRun(run, "before");
 * ```
 */
export function comparedRun(run: RecordedRun, label: string): ComparedRun {
  return { id: run.meta.id, label, measures: measureRun(run.meta, run.timeline), device: isGpuRun(run.meta) ? "gpu" : "cpu" };
}

/**
 * A run report, optionally compared against an earlier run (`vs` is the "before").
 *
 * @example
 * ```ts
 * const model = runReport(await loadRun(store, id), await loadRun(store, baselineId));
 * model.comparison?.speedup; // 1.8
 * ```
 */
export function runReport(run: RecordedRun, vs?: RecordedRun): RunReportModel {
  const tl = run.timeline;
  const m = measureRun(run.meta, tl);
  const doctor = diagnose(run.meta, tl);
  return {
    kind: "run",
    id: run.meta.id,
    title: `${run.meta.kind === "trial" ? "Trial" : "Run"} ${run.meta.name !== undefined ? `${run.meta.name} (${run.meta.id})` : run.meta.id}`,
    facts: runFacts(run.meta, m),
    numbers: measureRows(m, isGpuRun(run.meta)),
    doctor,
    charts: [
      ...runCharts(run.meta, tl, m),
      ...[lossChart([{ label: "this run", meta: run.meta, timeline: tl }])].filter((c) => c !== null),
      ...metricCharts([{ label: "this run", meta: run.meta, timeline: tl }]),
    ],
    comparison: vs === undefined ? null : compareRuns(comparedRun(vs, `before (${vs.meta.id})`), comparedRun(run, `after (${run.meta.id})`)),
  };
}

/**
 * A run's numbers when only its tune.json trial record is known (its run folder is gone).
 *
 * @example
 * ```ts
 * trialMeasures(tune.trials[0]).samples_per_s;
 * ```
 */
export function trialMeasures(t: TuneTrialRecord, gpu: boolean): RunMeasures {
  const mb = typeof t.knobs.batch_size === "number" ? t.knobs.batch_size : typeof t.knobs.micro_batch === "number" ? t.knobs.micro_batch : null;
  const acc = typeof t.knobs.accumulation === "number" ? t.knobs.accumulation : null;
  return {
    duration_s: t.duration_s,
    steps: 0,
    steady_steps: 0,
    samples: 0,
    steady_samples: 0,
    samples_per_s: t.samples_per_s,
    throughput_source: null,
    data_wait_share: t.data_wait_share,
    env_steps_per_s: null,
    step_time_s: null,
    wait_time_s: null,
    compute_time_s: null,
    peak_tree_gpu_bytes: gpu ? t.peak_bytes : null,
    peak_tree_rss_bytes: gpu ? null : t.peak_bytes,
    framework_peak_allocated_bytes: t.framework_peak_bytes,
    framework_peak_reserved_bytes: null,
    gpu_util_mean: t.gpu_util_mean,
    sm_activity_mean: null,
    power_mean_w: null,
    energy_j: null,
    energy_j_per_sample: null,
    tree_cpu_percent_mean: null,
    host_cpu_percent_mean: null,
    oom_recoveries: t.oom_recoveries,
    micro_batch: mb,
    accumulation: acc,
    precision: typeof t.knobs.precision === "string" ? t.knobs.precision : null,
    precision_source: typeof t.knobs.precision === "string" ? "run_knobs" : null,
    num_workers: typeof t.knobs.num_workers === "number" ? t.knobs.num_workers : null,
    steady_window: null,
    memory_limit_bytes: null,
    memory_limit_source: null,
    gpu: null,
    gpu_indexes: [],
    host_cpus: null,
  };
}

function trialSide(tune: TuneRecord, t: TuneTrialRecord, runs: ReadonlyMap<number, RecordedRun>, label: string): ComparedRun {
  const run = runs.get(t.index);
  if (run !== undefined) return comparedRun(run, label);
  const gpu = tune.cap_scope === "gpu";
  return { id: t.run_id ?? `trial ${t.index}`, label, measures: trialMeasures(t, gpu), device: gpu ? "gpu" : "cpu" };
}

/**
 * A tune report: the trials, the curves (throughput and peak memory against micro-batch, with the
 * cap and the fitted memory line), and before/after of the baseline against the winner — or of `vs`
 * against the winner when given.
 *
 * @example
 * ```ts
 * const { tune, runs } = await loadTune(store, id);
 * tuneReport(tune, runs).charts.map((c) => c.id); // ["tune_throughput", "tune_memory"]
 * ```
 */
export function tuneReport(tune: TuneRecord, runs: ReadonlyMap<number, RecordedRun> = new Map(), vs?: RecordedRun): TuneReportModel {
  const microBatches = new Map<number, number>();
  for (const [index, run] of runs) {
    const mb = run.meta.summary?.micro_batch ?? measureRun(run.meta, run.timeline).micro_batch;
    if (mb !== null) microBatches.set(index, mb);
  }
  const points = trialPoints(tune, microBatches);
  const gpu = tune.cap_scope === "gpu";
  // the search's own closing line ("winner: …") is left out: the record's winner, or its no_winner, is the one verdict
  const notes = tune.notes.filter((note) => !note.startsWith("winner:"));
  const baseline = tune.trials.find((t) => t.purpose === "baseline") ?? tune.trials[0];
  const winner = tune.winner === null ? undefined : tune.trials.find((t) => t.index === tune.winner?.index);
  let comparison: Comparison | null = null;
  if (winner !== undefined && vs !== undefined) {
    comparison = compareRuns(comparedRun(vs, `before (${vs.meta.id})`), trialSide(tune, winner, runs, `winner (trial ${winner.index})`));
  } else if (winner !== undefined && baseline !== undefined && baseline.index !== winner.index) {
    comparison = compareRuns(
      trialSide(tune, baseline, runs, `baseline (trial ${baseline.index})`),
      trialSide(tune, winner, runs, `winner (trial ${winner.index})`),
    );
  }
  if (tune.winner === null && tune.no_winner) notes.push(`Next: ${tune.no_winner.next}.`);
  const missing = tune.trials.filter((t) => t.run_id !== null && !runs.has(t.index)).length;
  if (missing > 0) notes.push(`${missing} trial run${missing === 1 ? " is" : "s are"} not in the store; their numbers come from tune.json.`);
  return {
    kind: "tune",
    id: tune.id,
    title: `Tune ${tune.name !== undefined ? `${tune.name} (${tune.id})` : tune.id}`,
    facts: [
      { label: "command", value: tune.command.join(" ") },
      {
        label: "knobs",
        value:
          tune.bindings
            .map((b) => `${b.knob} (${b.via}${b.key !== undefined ? ` ${b.file ?? ""}:${b.key}` : b.line !== undefined ? ` ${b.file ?? ""}:${b.line}` : ""})`)
            .join(", ") || "none",
      },
      { label: "cap", value: `${formatBytes(tune.cap_bytes)} (${gpu ? "GPU memory" : "RAM"})` },
      { label: "trials", value: `${tune.trials.length} (${tune.trials.filter((t) => t.end === "ok").length} finished)` },
      { label: "stopped", value: tune.stop_reason ?? (tune.ended_at === null ? "still running" : "?") },
      ...(tune.strategy !== undefined ? [{ label: "strategy", value: tune.strategy }] : []),
      {
        label: "winner",
        value:
          tune.winner === null
            ? noWinnerText(tune)
            : `trial ${tune.winner.index}: ${knobText(tune.winner.knobs)}${tune.winner.speedup !== null ? ` (×${tune.winner.speedup.toFixed(2)} vs baseline)` : ""}`,
      },
      ...(tune.parity !== undefined
        ? [
            { label: tune.parity.verdict === "batch_changed" ? "effective batch" : "loss parity", value: tune.parity.line },
            ...tune.parity.evidence.map((e) => ({ label: "what changed", value: e.text })),
          ]
        : []),
      ...(tune.memory_line !== null
        ? [
            {
              label: "memory line",
              value: `${
                tune.memory_line.bytes_per_sample >= 0
                  ? `${formatBytes(tune.memory_line.intercept_bytes)} + ${formatBytes(tune.memory_line.bytes_per_sample)} per sample`
                  : "no growth with the micro-batch in these trials"
              }; largest micro-batch predicted to fit: ${tune.memory_line.predicted_max_micro_batch}`,
            },
          ]
        : []),
    ],
    trials: tune.trials.map((t) => ({
      index: t.index,
      run_id: t.run_id,
      purpose: t.purpose,
      knobs: knobText(t.knobs),
      end: t.end,
      samples_per_s: formatRate(t.samples_per_s),
      peak: formatMaybeBytes(t.peak_bytes),
      utilization: formatPercent(t.gpu_util_mean),
      data_wait: formatShare(t.data_wait_share),
      winner: tune.winner?.index === t.index,
    })),
    points,
    charts: [tuneThroughputChart(tune, points), tuneMemoryChart(tune, points)],
    comparison,
    notes,
    parity: tuneParity(tune),
  };
}

function noWinnerText(tune: TuneRecord): string {
  if (tune.ended_at === null) return "none yet (still running)";
  if (tune.stop_reason === "interrupted") return "none: the tune was interrupted";
  return `none: ${tune.no_winner?.reason ?? "no trial finished with a throughput"}`;
}

function knobText(knobs: Record<string, number | string | boolean>): string {
  const parts = Object.entries(knobs).map(([k, v]) => `${k}=${String(v)}`);
  return parts.length === 0 ? "(defaults)" : parts.join(", ");
}
