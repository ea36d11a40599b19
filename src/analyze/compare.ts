/**
 * Before/after comparison of two runs from their measurements.
 *
 * @module
 */
import { formatMaybeBytes, formatPercent, formatRate, formatShare } from "../format.ts";
import type { RunMeasures } from "./measure.ts";

/**
 * One side of a comparison.
 *
 * @example
 * ```ts
 * const before: ComparedRun = { id, label: "before", measures: measureRun(meta, tl), device: "gpu" };
 * ```
 */
export interface ComparedRun {
  id: string;
  label: string;
  measures: RunMeasures;
  /** "gpu" or "cpu": decides which memory and utilization are compared */
  device: "gpu" | "cpu";
}

/**
 * One row of the before/after table.
 *
 * @example
 * ```ts
 * comparison.rows.find((r: ComparisonRow) => r.key === "samples_per_s")?.change; // "+212"
 * ```
 */
export interface ComparisonRow {
  key: "micro_batch" | "accumulation" | "precision" | "peak_memory" | "samples_per_s" | "utilization" | "data_wait_share" | "speedup";
  label: string;
  before: number | string | null;
  after: number | string | null;
  /** both as a person reads them */
  before_text: string;
  after_text: string;
  /** the change, e.g. "×2.41", "−1.2 GiB", "+35 pts"; "" when not comparable */
  change: string;
}

/**
 * A before/after comparison.
 *
 * @example
 * ```ts
 * const c: Comparison = compareRuns(before, after);
 * c.speedup; // 2.41
 * ```
 */
export interface Comparison {
  before: { id: string; label: string };
  after: { id: string; label: string };
  rows: ComparisonRow[];
  /** after's samples/s over before's; null when either is missing */
  speedup: number | null;
  notes: string[];
}

function peakMemory(r: ComparedRun): number | null {
  return r.device === "gpu" ? (r.measures.peak_tree_gpu_bytes ?? r.measures.framework_peak_reserved_bytes) : r.measures.peak_tree_rss_bytes;
}

function utilization(r: ComparedRun): number | null {
  return r.device === "gpu" ? r.measures.gpu_util_mean : r.measures.tree_cpu_percent_mean;
}

/** One row: both values as a person reads them, and the change where both are known. */
function row<T extends number | string>(
  key: ComparisonRow["key"],
  label: string,
  before: T | null,
  after: T | null,
  text: (value: T | null) => string,
  change: (before: T, after: T) => string,
): ComparisonRow {
  return {
    key,
    label,
    before,
    after,
    before_text: text(before),
    after_text: text(after),
    change: before !== null && after !== null ? change(before, after) : "",
  };
}

function signed(value: number, text: string): string {
  return `${value > 0 ? "+" : value < 0 ? "−" : "±"}${text}`;
}

/**
 * Compares two runs: micro-batch, accumulation, precision, peak memory, samples/s, utilization, data
 * wait and the speedup, each from the runs' own measurements.
 *
 * @example
 * ```ts
 * const c = compareRuns({ id: a, label: "before", measures: ma, device: "gpu" }, { id: b, label: "after", measures: mb, device: "gpu" });
 * c.speedup; // 2.41
 * ```
 */
export function compareRuns(before: ComparedRun, after: ComparedRun): Comparison {
  const b = before.measures;
  const a = after.measures;
  const plain = (v: number | null): string => (v === null ? "n/a" : String(v));
  const gpu = before.device === "gpu";
  const rows: ComparisonRow[] = [
    row("micro_batch", "micro-batch", b.micro_batch, a.micro_batch, plain, (x, y) => (x > 0 && y !== x ? `×${formatRate(y / x)}` : "")),
    row("accumulation", "accumulation", b.accumulation, a.accumulation, plain, (x, y) => (y !== x ? `${x} → ${y}` : "")),
    row(
      "precision",
      "precision",
      b.precision,
      a.precision,
      (v) => v ?? "unknown",
      (x, y) => (y !== x ? "changed" : ""),
    ),
    row("peak_memory", gpu ? "peak GPU memory" : "peak RSS", peakMemory(before), peakMemory(after), formatMaybeBytes, (x, y) =>
      signed(y - x, formatMaybeBytes(Math.abs(y - x))),
    ),
    row("samples_per_s", "samples/s", b.samples_per_s, a.samples_per_s, formatRate, (x, y) => signed(y - x, formatRate(Math.abs(y - x)))),
    row("utilization", gpu ? "GPU utilization" : "CPU of the job (100 % = one core)", utilization(before), utilization(after), formatPercent, (x, y) =>
      signed(y - x, `${Math.abs(y - x).toFixed(0)} pts`),
    ),
    row("data_wait_share", "data wait", b.data_wait_share, a.data_wait_share, formatShare, (x, y) =>
      signed(y - x, `${(100 * Math.abs(y - x)).toFixed(1)} pts`),
    ),
  ];
  const speedup = b.samples_per_s !== null && a.samples_per_s !== null && b.samples_per_s > 0 ? a.samples_per_s / b.samples_per_s : null;
  rows.push({
    key: "speedup",
    label: "speedup",
    before: 1,
    after: speedup,
    before_text: "1.00×",
    after_text: speedup === null ? "n/a" : `${speedup.toFixed(2)}×`,
    change: "",
  });
  const notes: string[] = [];
  if (before.device !== after.device)
    notes.push(`The runs used different devices (${before.device} before, ${after.device} after): memory and utilization are not comparable.`);
  if (b.steady_steps < 5 || a.steady_steps < 5)
    notes.push(`Few steady steps (${b.steady_steps} before, ${a.steady_steps} after): the speedup is a rough figure.`);
  return { before: { id: before.id, label: before.label }, after: { id: after.id, label: after.label }, rows, speedup, notes };
}
