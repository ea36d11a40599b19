/**
 * Typed views of a run's timeline (docs/run-store.md): sampler readings, SDK steps and events, as
 * the analysis needs them. Fields a reader does not find are `null`, never 0; entries of unknown
 * kinds are skipped.
 *
 * @module
 */
import type { TimelineEntry } from "../record/types.ts";
import { mainProcessPid } from "../record/summary.ts";

/**
 * One GPU in a sampler reading.
 *
 * @example
 * ```ts
 * tl.samples[0]?.gpus[0]?.util; // 97
 * ```
 */
export interface GpuReading {
  index: number;
  used_bytes: number | null;
  total_bytes: number | null;
  util: number | null;
  mem_util: number | null;
  sm_activity: number | null;
  power_w: number | null;
  sm_clock_mhz: number | null;
  throttle: string[] | null;
  tensor_activity: number | null;
  /** host-to-device PCIe bytes per second (NVML "RX", received by the GPU; recorded as `pcie_rx_kbs`, KiB/s) */
  pcie_rx_bytes_per_s: number | null;
  /** device-to-host PCIe bytes per second (NVML "TX"; recorded as `pcie_tx_kbs`) */
  pcie_tx_bytes_per_s: number | null;
  /** processes holding memory on this GPU (the driver's list: may include other users' processes) */
  processes: number | null;
}

/**
 * One sampler reading.
 *
 * @example
 * ```ts
 * readTimeline(entries).samples.map((s: SampleEntry) => s.tree.rss_bytes);
 * ```
 */
export interface SampleEntry {
  t: number;
  tree: {
    pids: number | null;
    rss_bytes: number | null;
    cpu_percent: number | null;
    gpu_bytes: number | null;
    /** processes of the tree that hold GPU memory, where the sampler counts them */
    gpu_pids: number | null;
  };
  gpus: GpuReading[];
  host: { mem_available_bytes: number | null; cpu_percent: number | null };
}

/**
 * The framework's memory at the end of a step (SDK `mem`).
 *
 * @example
 * ```ts
 * tl.steps[0]?.mem?.peak_reserved; // PyTorch's reserved peak, bytes
 * ```
 */
export interface StepMemory {
  device: string | null;
  allocated: number | null;
  reserved: number | null;
  peak: number | null;
  peak_reserved: number | null;
  rss: number | null;
  peak_rss: number | null;
}

/**
 * One SDK step report. `t` is when it was reported: the step ran from `t - wait_s - compute_s` to `t`.
 *
 * @example
 * ```ts
 * const busy = (s: StepEntry) => s.wait_s + s.compute_s;
 * ```
 */
export interface StepEntry {
  t: number;
  pid: number;
  step: number;
  samples: number;
  wait_s: number;
  compute_s: number;
  warmup: boolean;
  micro_batch: number | null;
  accumulation: number | null;
  loss: number | string | null;
  mem: StepMemory | null;
}

/**
 * One SDK event, or one of brim's own.
 *
 * @example
 * ```ts
 * tl.events.filter((e: EventEntry) => e.event === "oom_recovered").length;
 * ```
 */
export interface EventEntry {
  t: number;
  pid: number | null;
  event: string;
  step: number | null;
  message: string | null;
  details: Record<string, unknown>;
}

/**
 * One SDK hello: who a process is.
 *
 * @example
 * ```ts
 * tl.hellos.find((h: HelloEntry) => h.rank === 0)?.pid;
 * ```
 */
export interface HelloEntry {
  t: number;
  pid: number;
  role: string | null;
  rank: number | null;
  framework: string | null;
  versions: Record<string, string>;
}

/**
 * A run's timeline, split by kind, each in time order.
 *
 * @example
 * ```ts
 * const tl: Timeline = readTimeline(entries);
 * tl.mainPid; // 4242
 * ```
 */
export interface Timeline {
  start: { t: number; pid: number | null } | null;
  end: { t: number; cause: string | null } | null;
  samples: SampleEntry[];
  steps: StepEntry[];
  events: EventEntry[];
  hellos: HelloEntry[];
  /** the process whose steps count (rank 0, else the main process, else the one with most steps) */
  mainPid: number | null;
}

function num(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

function str(value: unknown): string | null {
  return typeof value === "string" ? value : null;
}

function obj(value: unknown): Record<string, unknown> | null {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

function kib(value: number | null): number | null {
  return value === null ? null : value * 1024;
}

function readGpu(value: unknown, position: number): GpuReading | null {
  const g = obj(value);
  if (g === null) return null;
  const throttle = Array.isArray(g.throttle) ? g.throttle.filter((r): r is string => typeof r === "string") : null;
  return {
    index: num(g.index) ?? position,
    used_bytes: num(g.used_bytes),
    total_bytes: num(g.total_bytes),
    util: num(g.util),
    mem_util: num(g.mem_util),
    sm_activity: num(g.sm_activity),
    power_w: num(g.power_w),
    sm_clock_mhz: num(g.sm_clock_mhz),
    throttle,
    tensor_activity: num(g.tensor_activity),
    pcie_rx_bytes_per_s: num(g.pcie_rx_bytes_per_s) ?? kib(num(g.pcie_rx_kbs)),
    pcie_tx_bytes_per_s: num(g.pcie_tx_bytes_per_s) ?? kib(num(g.pcie_tx_kbs)),
    processes: num(g.processes),
  };
}

function readSample(e: TimelineEntry): SampleEntry {
  const tree = obj(e.tree) ?? {};
  const host = obj(e.host) ?? {};
  const gpus = Array.isArray(e.gpus) ? e.gpus.map(readGpu).filter((g): g is GpuReading => g !== null) : [];
  return {
    t: e.t,
    tree: {
      pids: num(tree.pids),
      // A live process tree never has zero RSS: 0 is a reading of a tree that was being reaped.
      rss_bytes: num(tree.rss_bytes) === 0 ? null : num(tree.rss_bytes),
      cpu_percent: num(tree.cpu_percent),
      gpu_bytes: num(tree.gpu_bytes),
      gpu_pids: num(tree.gpu_pids),
    },
    gpus,
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

function readStep(e: TimelineEntry): StepEntry | null {
  const wait = num(e.wait_s);
  const compute = num(e.compute_s);
  const pid = num(e.pid);
  if (wait === null || compute === null || pid === null) return null;
  const loss = typeof e.loss === "string" ? e.loss : num(e.loss);
  return {
    t: e.t,
    pid,
    step: num(e.step) ?? 0,
    samples: num(e.samples) ?? 0,
    wait_s: Math.max(0, wait),
    compute_s: Math.max(0, compute),
    warmup: e.warmup === true,
    micro_batch: num(e.micro_batch),
    accumulation: num(e.accumulation),
    loss,
    mem: readMemory(e.mem),
  };
}

function readEvent(e: TimelineEntry): EventEntry | null {
  const name = str(e.event);
  if (name === null) return null;
  return { t: e.t, pid: num(e.pid), event: name, step: num(e.step), message: str(e.message), details: obj(e.details) ?? {} };
}

function readHello(e: TimelineEntry): HelloEntry | null {
  const pid = num(e.pid);
  if (pid === null) return null;
  const versions: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj(e.versions) ?? {})) if (typeof v === "string") versions[k] = v;
  return { t: e.t, pid, role: str(e.role), rank: num(e.rank), framework: str(e.framework), versions };
}

/**
 * Splits timeline entries by kind into typed lists, sorted by time, and finds the main process.
 *
 * @example
 * ```ts
 * const { meta, timeline } = await store.readRun(id);
 * const tl = readTimeline(timeline);
 * tl.steps.filter((s) => s.pid === tl.mainPid && !s.warmup).length; // steady steps of the main process
 * ```
 */
export function readTimeline(entries: readonly TimelineEntry[]): Timeline {
  const samples: SampleEntry[] = [];
  const steps: StepEntry[] = [];
  const events: EventEntry[] = [];
  const hellos: HelloEntry[] = [];
  let start: Timeline["start"] = null;
  let end: Timeline["end"] = null;
  for (const e of entries) {
    switch (e.kind) {
      case "sample":
        samples.push(readSample(e));
        break;
      case "step": {
        const s = readStep(e);
        if (s !== null) steps.push(s);
        break;
      }
      case "event": {
        const ev = readEvent(e);
        if (ev !== null) events.push(ev);
        break;
      }
      case "hello": {
        const h = readHello(e);
        if (h !== null) hellos.push(h);
        break;
      }
      case "start":
        start ??= { t: e.t, pid: num(e.pid) };
        break;
      case "end":
        end = { t: e.t, cause: str(e.cause) };
        break;
      default:
        break;
    }
  }
  const byTime = (a: { t: number }, b: { t: number }): number => a.t - b.t;
  samples.sort(byTime);
  steps.sort(byTime);
  events.sort(byTime);
  hellos.sort(byTime);
  return { start, end, samples, steps, events, hellos, mainPid: mainProcessPid(entries) };
}

/**
 * The steps of the main process, in order.
 *
 * @example
 * ```ts
 * mainSteps(readTimeline(entries)).length;
 * ```
 */
export function mainSteps(tl: Timeline): StepEntry[] {
  return tl.steps.filter((s) => s.pid === tl.mainPid);
}

/**
 * When a step began: its report time minus its wait and compute.
 *
 * @example
 * ```ts
 * stepStart({ t: 10, wait_s: 0.5, compute_s: 1.5 } as StepEntry); // 8
 * ```
 */
export function stepStart(s: Pick<StepEntry, "t" | "wait_s" | "compute_s">): number {
  return s.t - s.wait_s - s.compute_s;
}
