/**
 * A run's timeline as a Chrome trace-event JSON file (the "JSON trace format"), which Perfetto
 * (ui.perfetto.dev) and chrome://tracing open: each process's steps as slices (with their data
 * wait and compute inside), sampler readings as counters, SDK and brim events as instants.
 *
 * @module
 */
import { stepSeconds, stepStart, type Timeline } from "../record/timeline/index.ts";
import type { RecordedRun } from "./model.ts";

/**
 * One trace event (the fields Perfetto's JSON importer reads).
 *
 * @example
 * ```ts
 * const slice: TraceEvent = { name: "step 7", ph: "X", ts: 1200000, dur: 52000, pid: 4242, tid: 4242 };
 * ```
 */
export interface TraceEvent {
  name: string;
  ph: "X" | "C" | "i" | "M";
  ts: number;
  pid: number;
  tid: number;
  dur?: number;
  cat?: string;
  s?: "g" | "p" | "t";
  args?: Record<string, unknown>;
}

/**
 * A whole trace file.
 *
 * @example
 * ```ts
 * const trace: TraceFile = perfettoTrace([run]);
 * trace.traceEvents.length;
 * ```
 */
export interface TraceFile {
  traceEvents: TraceEvent[];
  displayTimeUnit: "ms";
  metadata: Record<string, unknown>;
}

const MIB = 2 ** 20;
/** Sampler counters go to a process of their own, numbered above any real pid (Linux pid_max ≤ 2^22). */
const SAMPLER_PID_BASE = 1 << 23;

function us(t: number, origin: number): number {
  return Math.round((t - origin) * 1e6);
}

function counters(tl: Timeline, pid: number, origin: number, out: TraceEvent[]): void {
  for (const s of tl.samples) {
    const ts = us(s.t, origin);
    const tree: Record<string, number> = {};
    if (s.tree.cpu_percent !== null) tree.cpu_percent = s.tree.cpu_percent;
    if (Object.keys(tree).length > 0) out.push({ name: "job CPU (%)", ph: "C", ts, pid, tid: 0, args: tree });
    const mem: Record<string, number> = {};
    if (s.tree.rss_bytes !== null) mem.rss_mib = s.tree.rss_bytes / MIB;
    if (s.tree.gpu_bytes !== null) mem.gpu_mib = s.tree.gpu_bytes / MIB;
    if (Object.keys(mem).length > 0) out.push({ name: "job memory (MiB)", ph: "C", ts, pid, tid: 0, args: mem });
    for (const g of s.gpus) {
      const act: Record<string, number> = {};
      if (g.util !== null) act.utilization = g.util;
      if (g.sm_activity !== null) act.sm_activity = g.sm_activity;
      if (Object.keys(act).length > 0) out.push({ name: `GPU ${g.index} activity (%)`, ph: "C", ts, pid, tid: 0, args: act });
      if (g.used_bytes !== null) out.push({ name: `GPU ${g.index} used (MiB)`, ph: "C", ts, pid, tid: 0, args: { used: g.used_bytes / MIB } });
      if (g.power_w !== null) out.push({ name: `GPU ${g.index} power (W)`, ph: "C", ts, pid, tid: 0, args: { power: g.power_w } });
      if (g.sm_clock_mhz !== null) out.push({ name: `GPU ${g.index} SM clock (MHz)`, ph: "C", ts, pid, tid: 0, args: { clock: g.sm_clock_mhz } });
      if (g.pcie_rx_bytes_per_s !== null || g.pcie_tx_bytes_per_s !== null) {
        out.push({
          name: `GPU ${g.index} PCIe (MiB/s)`,
          ph: "C",
          ts,
          pid,
          tid: 0,
          args: { to_gpu: (g.pcie_rx_bytes_per_s ?? 0) / MIB, from_gpu: (g.pcie_tx_bytes_per_s ?? 0) / MIB },
        });
      }
    }
  }
}

/**
 * Builds a trace of one or more runs (a tune's trials side by side). Times count from the earliest
 * run's start; each run's sampler counters get a process of their own.
 *
 * @example
 * ```ts
 * const trace = perfettoTrace([await loadRun(store, id)]);
 * await writeFile("trace.json", JSON.stringify(trace));
 * ```
 */
export function perfettoTrace(runs: readonly (RecordedRun & { label?: string })[]): TraceFile {
  const timelines = runs.map((r) => ({ run: r, tl: r.timeline }));
  const starts = timelines
    .map(({ run, tl }) => tl.start?.t ?? tl.samples[0]?.t ?? tl.steps[0]?.t ?? Date.parse(run.meta.started_at) / 1000)
    .filter(Number.isFinite);
  const origin = starts.length > 0 ? Math.min(...starts) : 0;
  const events: TraceEvent[] = [];
  timelines.forEach(({ run, tl }, i) => {
    const label = run.label ?? `${run.meta.kind} ${run.meta.id}`;
    const roles = new Map(tl.hellos.map((h) => [h.pid, h.rank !== null ? `rank ${h.rank}` : (h.role ?? "process")]));
    const pids = new Set<number>([...tl.steps.map((s) => s.pid), ...tl.hellos.map((h) => h.pid)]);
    if (tl.start?.pid != null) pids.add(tl.start.pid);
    for (const pid of pids) {
      const role = pid === tl.mainPid ? "main" : (roles.get(pid) ?? "process");
      events.push({ name: "process_name", ph: "M", ts: 0, pid, tid: pid, args: { name: `${label} · pid ${pid} (${role})` } });
      events.push({ name: "thread_name", ph: "M", ts: 0, pid, tid: pid, args: { name: "training loop" } });
    }
    for (const s of tl.steps) {
      const start = stepStart(s);
      const args: Record<string, unknown> = { samples: s.samples, wait_s: s.wait_s, compute_s: s.compute_s, warmup: s.warmup };
      if (s.micro_batch !== null) args.micro_batch = s.micro_batch;
      if (s.accumulation !== null) args.accumulation = s.accumulation;
      if (s.loss !== null) args.loss = s.loss;
      events.push({
        name: `step ${s.step}${s.warmup ? " (warm-up)" : ""}`,
        cat: "step",
        ph: "X",
        ts: us(start, origin),
        dur: Math.max(1, Math.round((stepSeconds(s) ?? 0) * 1e6)),
        pid: s.pid,
        tid: s.pid,
        args,
      });
      if (s.wait_s !== null && s.wait_s > 0)
        events.push({ name: "data wait", cat: "wait", ph: "X", ts: us(start, origin), dur: Math.max(1, Math.round(s.wait_s * 1e6)), pid: s.pid, tid: s.pid });
      if (s.compute_s !== null && s.compute_s > 0)
        events.push({
          name: "compute",
          cat: "compute",
          ph: "X",
          ts: us(start + (s.wait_s ?? 0), origin),
          dur: Math.max(1, Math.round(s.compute_s * 1e6)),
          pid: s.pid,
          tid: s.pid,
        });
    }
    const samplerPid = SAMPLER_PID_BASE + i;
    events.push({ name: "process_name", ph: "M", ts: 0, pid: samplerPid, tid: 0, args: { name: `${label} · brim sampler` } });
    counters(tl, samplerPid, origin, events);
    for (const e of tl.events) {
      const pid = e.pid ?? samplerPid;
      events.push({
        name: e.event,
        cat: "event",
        ph: "i",
        s: e.pid === null ? "g" : "p",
        ts: us(e.t, origin),
        pid,
        tid: e.pid ?? 0,
        args: { ...e.details, ...(e.message !== null ? { message: e.message } : {}), ...(e.step !== null ? { step: e.step } : {}) },
      });
    }
    if (tl.start !== null) events.push({ name: "job started", cat: "run", ph: "i", s: "g", ts: us(tl.start.t, origin), pid: samplerPid, tid: 0 });
    if (tl.end !== null)
      events.push({ name: `job ended: ${tl.end.cause ?? "?"}`, cat: "run", ph: "i", s: "g", ts: us(tl.end.t, origin), pid: samplerPid, tid: 0 });
  });
  return {
    traceEvents: events,
    displayTimeUnit: "ms",
    metadata: { source: "brim", runs: runs.map((r) => r.meta.id), origin_unix_s: origin },
  };
}
