/**
 * Reading timeline entries: a line of timeline.ndjson parsed, and each kind of entry read into its
 * typed form, leniently (a field of the wrong type reads as unknown, never as a wrong number).
 *
 * @module
 */
import { isTimelineEntry } from "../schema.ts";
import type { RunMeta, TimelineEntry } from "../types.ts";
import type { EventEntry, GpuReading, HelloEntry, SampleEntry, StepEntry, StepMemory } from "./types.ts";

/** A field read as a finite number, else null. @example num(3.5); // 3.5 */
export const num = (value: unknown): number | null => (typeof value === "number" && Number.isFinite(value) ? value : null);
/** A field read as a string, else null. @example str("ok"); // "ok" */
export const str = (value: unknown): string | null => (typeof value === "string" ? value : null);
const obj = (value: unknown): Record<string, unknown> | null =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
const kib = (value: number | null): number | null => (value === null ? null : value * 1024);

/**
 * The time a step took: wait plus compute, a missing half counting 0; null when the reporter timed
 * neither (such a step counts as a step, but not in throughput, data wait or step time).
 *
 * @example
 * ```ts
 * stepSeconds({ wait_s: 0.1, compute_s: null }); // 0.1
 * stepSeconds({ wait_s: null, compute_s: null }); // null
 * ```
 */
export function stepSeconds(s: Pick<StepEntry, "wait_s" | "compute_s">): number | null {
  if (s.wait_s === null && s.compute_s === null) return null;
  return (s.wait_s ?? 0) + (s.compute_s ?? 0);
}

/**
 * When a step began: its report time minus its time ({@link stepSeconds}).
 *
 * @example
 * ```ts
 * stepStart({ t: 10, wait_s: 0.5, compute_s: 1.5 }); // 8
 * ```
 */
export function stepStart(s: Pick<StepEntry, "t" | "wait_s" | "compute_s">): number {
  return s.t - (stepSeconds(s) ?? 0);
}

/**
 * Whether a run used a GPU: a GPU backend that found at least one GPU.
 *
 * @example
 * ```ts
 * isGpuRun(meta); // false for a CPU run
 * ```
 */
export function isGpuRun(meta: Pick<RunMeta, "device">): boolean {
  return meta.device.backend !== "cpu" && meta.device.gpus.length > 0;
}

function readGpu(value: unknown, position: number): GpuReading | null {
  const g = obj(value);
  if (g === null) return null;
  return {
    index: num(g.index) ?? position,
    used_bytes: num(g.used_bytes),
    total_bytes: num(g.total_bytes),
    util: num(g.util),
    mem_util: num(g.mem_util),
    sm_activity: num(g.sm_activity),
    power_w: num(g.power_w),
    energy_j: num(g.energy_j),
    sm_clock_mhz: num(g.sm_clock_mhz),
    throttle: Array.isArray(g.throttle) ? g.throttle.filter((r): r is string => typeof r === "string") : null,
    tensor_activity: num(g.tensor_activity),
    pcie_rx_bytes_per_s: num(g.pcie_rx_bytes_per_s) ?? kib(num(g.pcie_rx_kbs)),
    pcie_tx_bytes_per_s: num(g.pcie_tx_bytes_per_s) ?? kib(num(g.pcie_tx_kbs)),
    processes: num(g.processes),
  };
}

/**
 * A `sample` line as a typed reading. A tree RSS of 0 is a tree being reaped: null.
 *
 * @example
 * ```ts
 * sampleOf({ t: 1, kind: "sample", tree: null, gpus: [] }).gpus; // []
 * ```
 */
export function sampleOf(e: TimelineEntry): SampleEntry {
  const tree = obj(e.tree) ?? {};
  const host = obj(e.host) ?? {};
  const rss = num(tree.rss_bytes);
  return {
    t: e.t,
    tree: {
      pids: num(tree.pids),
      rss_bytes: rss === 0 ? null : rss,
      cpu_percent: num(tree.cpu_percent),
      gpu_bytes: num(tree.gpu_bytes),
      gpu_pids: num(tree.gpu_pids),
    },
    gpus: Array.isArray(e.gpus) ? e.gpus.map(readGpu).filter((g): g is GpuReading => g !== null) : [],
    host: { mem_available_bytes: num(host.mem_available_bytes), cpu_percent: num(host.cpu_percent) },
  };
}

function readMemory(value: unknown): StepMemory | null {
  const m = obj(value);
  if (m === null) return null;
  return {
    device: str(m.device),
    allocated: num(m.allocated),
    reserved: num(m.reserved),
    peak: num(m.peak),
    peak_reserved: num(m.peak_reserved),
    rss: num(m.rss),
    peak_rss: num(m.peak_rss),
  };
}

const nonNegative = (value: number | null): number | null => (value === null ? null : Math.max(0, value));

/**
 * A `step` line as a typed step, or null without a pid. A missing `source` is "sdk".
 *
 * @example
 * ```ts
 * stepOf({ t: 2, kind: "step", pid: 7, step: 0, samples: 32, wait_s: 0.1, compute_s: 0.3 })?.source; // "sdk"
 * ```
 */
export function stepOf(e: TimelineEntry): StepEntry | null {
  const pid = num(e.pid);
  if (pid === null) return null;
  const source = e.source === "attach" || e.source === "progress" ? e.source : "sdk";
  return {
    t: e.t,
    pid,
    step: num(e.step) ?? 0,
    samples: num(e.samples),
    wait_s: nonNegative(num(e.wait_s)),
    compute_s: nonNegative(num(e.compute_s)),
    warmup: e.warmup === true,
    micro_batch: num(e.micro_batch),
    accumulation: num(e.accumulation),
    loss: typeof e.loss === "string" ? e.loss : num(e.loss),
    mem: readMemory(e.mem),
    source,
    precision: str(e.precision),
    trigger: str(e.trigger),
    backward_s: nonNegative(num(e.backward_s)),
    ...metricsOf(e.extra),
  };
}

/**
 * The `extra` field the attach puts on a few of the first DataLoader-fed steps: the samples the
 * model's input said beside the loader's (docs/attach.md); read by the tuner, not one of the job's own
 * scalars (no chart draws it).
 *
 * @example
 * ```ts
 * step.metrics?.[MODEL_SAMPLES_FIELD]; // 256: the model was fed 256 windows while the loader said 32 series
 * ```
 */
export const MODEL_SAMPLES_FIELD = "model_samples";

/** The finite numbers among a step's `extra` fields, as `{ metrics }`, or nothing. */
function metricsOf(extra: unknown): { metrics?: Record<string, number> } {
  const fields = obj(extra);
  if (fields === null) return {};
  const metrics: Record<string, number> = {};
  for (const [name, value] of Object.entries(fields)) if (typeof value === "number" && Number.isFinite(value)) metrics[name] = value;
  return Object.keys(metrics).length > 0 ? { metrics } : {};
}

/** An event entry, or null without its name. */
export function eventOf(e: TimelineEntry): EventEntry | null {
  const name = str(e.event);
  if (name === null) return null;
  return { t: e.t, pid: num(e.pid), event: name, step: num(e.step), message: str(e.message), details: obj(e.details) ?? {} };
}

/** A hello entry, or null without its pid. */
export function helloOf(e: TimelineEntry): HelloEntry | null {
  const pid = num(e.pid);
  if (pid === null) return null;
  const versions: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj(e.versions) ?? {})) if (typeof v === "string") versions[k] = v;
  return { t: e.t, pid, role: str(e.role), rank: num(e.rank), local_rank: num(e.local_rank), framework: str(e.framework), versions };
}

/**
 * One line of timeline.ndjson as an entry, or null for a blank line, a line that is not a JSON
 * object with a numeric `t` and a string `kind`.
 *
 * @example
 * ```ts
 * parseTimelineLine('{"t":1,"kind":"start","pid":4}'); // { t: 1, kind: "start", pid: 4 }
 * parseTimelineLine('{"t":2,"ki');                      // null
 * ```
 */
export function parseTimelineLine(line: string): TimelineEntry | null {
  if (line.length === 0 || line.trim() === "") return null;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  return isTimelineEntry(value) ? value : null;
}

/**
 * Whether a step is warm-up, left out of every steady-state number: the one rule, shared with the
 * tuner's trial window (src/tune/window.ts). The reporter flags warm-up steps (the SDK and the
 * attach flag the first `BRIM_WARMUP_STEPS` steps; progress lines are flagged by the runner).
 *
 * @example
 * ```ts
 * isWarmupStep({ warmup: true }); // true
 * ```
 */
export function isWarmupStep(step: { warmup: boolean }): boolean {
  return step.warmup;
}
