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
  const rows: ComparisonRow[] = [];
  const plain = (v: number | null): string => (v === null ? "n/a" : String(v));
  rows.push({
    key: "micro_batch",
    label: "micro-batch",
    before: b.micro_batch,
    after: a.micro_batch,
    before_text: plain(b.micro_batch),
    after_text: plain(a.micro_batch),
    change:
      b.micro_batch !== null && a.micro_batch !== null && b.micro_batch > 0 && a.micro_batch !== b.micro_batch
        ? `×${formatRate(a.micro_batch / b.micro_batch)}`
        : "",
  });
  rows.push({
    key: "accumulation",
    label: "accumulation",
    before: b.accumulation,
    after: a.accumulation,
    before_text: plain(b.accumulation),
    after_text: plain(a.accumulation),
    change: b.accumulation !== null && a.accumulation !== null && a.accumulation !== b.accumulation ? `${b.accumulation} → ${a.accumulation}` : "",
  });
  rows.push({
    key: "precision",
    label: "precision",
    before: b.precision,
    after: a.precision,
    before_text: b.precision ?? "unknown",
    after_text: a.precision ?? "unknown",
    change: b.precision !== null && a.precision !== null && a.precision !== b.precision ? "changed" : "",
  });
  const pb = peakMemory(before);
  const pa = peakMemory(after);
  rows.push({
    key: "peak_memory",
    label: before.device === "gpu" ? "peak GPU memory" : "peak RSS",
    before: pb,
    after: pa,
    before_text: formatMaybeBytes(pb),
    after_text: formatMaybeBytes(pa),
    change: pb !== null && pa !== null ? signed(pa - pb, formatMaybeBytes(Math.abs(pa - pb))) : "",
  });
  rows.push({
    key: "samples_per_s",
    label: "samples/s",
    before: b.samples_per_s,
    after: a.samples_per_s,
    before_text: formatRate(b.samples_per_s),
    after_text: formatRate(a.samples_per_s),
    change:
      b.samples_per_s !== null && a.samples_per_s !== null
        ? signed(a.samples_per_s - b.samples_per_s, formatRate(Math.abs(a.samples_per_s - b.samples_per_s)))
        : "",
  });
  const ub = utilization(before);
  const ua = utilization(after);
  rows.push({
    key: "utilization",
    label: before.device === "gpu" ? "GPU utilization" : "CPU of the job (100 % = one core)",
    before: ub,
    after: ua,
    before_text: formatPercent(ub),
    after_text: formatPercent(ua),
    change: ub !== null && ua !== null ? signed(ua - ub, `${Math.abs(ua - ub).toFixed(0)} pts`) : "",
  });
  rows.push({
    key: "data_wait_share",
    label: "data wait",
    before: b.data_wait_share,
    after: a.data_wait_share,
    before_text: formatShare(b.data_wait_share),
    after_text: formatShare(a.data_wait_share),
    change:
      b.data_wait_share !== null && a.data_wait_share !== null
        ? signed(a.data_wait_share - b.data_wait_share, `${(100 * Math.abs(a.data_wait_share - b.data_wait_share)).toFixed(1)} pts`)
        : "",
  });
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
