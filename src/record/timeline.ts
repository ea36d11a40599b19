/**
 * The one model of what a run measured (docs/run-store.md "What the numbers mean"): the typed
 * entries of timeline.ndjson, read as a stream in bounded memory, and the definitions every reader
 * uses — the main process, steady steps, the steady window, the job's GPUs, whether a run is a GPU
 * run, throughput and its source, data wait, peaks and GPU means. The summary, the live view,
 * doctor, reports, the dashboard and the tuner all take their numbers from here.
 *
 * @module
 */
import { createReadStream } from "node:fs";
import { open } from "node:fs/promises";
import type { LivePeaks, RunMeta, RunSummary, TimelineEntry } from "./types.ts";

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
  energy_j: number | null;
  sm_clock_mhz: number | null;
  throttle: string[] | null;
  tensor_activity: number | null;
  /** host-to-device PCIe bytes per second (NVML "RX"; recorded as `pcie_rx_kbs`, KiB/s) */
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
 * tl.samples.map((s: SampleEntry) => s.tree.rss_bytes);
 * ```
 */
export interface SampleEntry {
  t: number;
  tree: { pids: number | null; rss_bytes: number | null; cpu_percent: number | null; gpu_bytes: number | null; gpu_pids: number | null };
  gpus: GpuReading[];
  host: { mem_available_bytes: number | null; cpu_percent: number | null };
}

/**
 * The framework's memory at the end of a step (SDK `mem`).
 *
 * @example
 * ```ts
 * tl.steps[0]?.mem?.peak_reserved;
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
 * Who measured a step: the SDK, brim's attach layer, or the job's progress lines.
 *
 * @example
 * ```ts
 * const source: StepSource = "attach";
 * ```
 */
export type StepSource = "sdk" | "attach" | "progress";

/**
 * One step report. `t` is when it was reported: the step ran from `t - wait_s - compute_s` to `t`.
 * `wait_s`/`compute_s` are null when the reporter did not time them; see {@link stepSeconds}.
 *
 * @example
 * ```ts
 * stepSeconds(tl.steps[0]!); // 0.12, or null for an untimed step
 * ```
 */
export interface StepEntry {
  t: number;
  pid: number;
  step: number;
  samples: number | null;
  wait_s: number | null;
  compute_s: number | null;
  warmup: boolean;
  micro_batch: number | null;
  accumulation: number | null;
  loss: number | string | null;
  mem: StepMemory | null;
  source: StepSource;
  /** the precision the step ran in, where the reporter says (attach does) */
  precision: string | null;
  /** what the attach layer counted as the step ("optimizer", "backward", …; docs/attach.md), null from the SDK */
  trigger: string | null;
}

/**
 * One SDK event, or one of brim's own.
 *
 * @example
 * ```ts
 * tl.events.filter((e: EventEntry) => e.event === "knob_read");
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
 * What a timeline measured, by the definitions of this module: the numbers of run.json's summary
 * that come from the timeline, and the facts the analysis builds on.
 *
 * @example
 * ```ts
 * readTimeline(entries).measured.samples_per_s;
 * ```
 */
export interface TimelineMeasures extends Omit<RunSummary, "duration_s" | "energy_j_per_sample"> {
  /** Σ wait_s and Σ compute_s over the steady steps that throughput counts */
  wait_total_s: number;
  compute_total_s: number;
  /** medians over the same steps */
  wait_time_s: number | null;
  compute_time_s: number | null;
  tree_cpu_percent_mean: number | null;
  host_cpu_percent_mean: number | null;
  /** first steady step's start to last steady step's end, Unix seconds */
  steady_window: [number, number] | null;
  /** the GPUs the job used (see {@link jobGpuIndexes}) */
  gpu_indexes: number[];
}

/**
 * A run's timeline as the readers use it: the measures (exact, over every line) and bounded lists
 * of entries for charts and evidence. On a long run the lists of steps and samples are thinned
 * evenly (`thinned`); the measures never are.
 *
 * @example
 * ```ts
 * const tl: Timeline = await loadTimeline(join(store.runDir(id), "timeline.ndjson"));
 * tl.mainPid; tl.measured.samples_per_s;
 * ```
 */
export interface Timeline {
  start: { t: number; pid: number | null } | null;
  end: { t: number; cause: string | null } | null;
  /** sampler readings, in time order (thinned evenly on a long run) */
  samples: SampleEntry[];
  /** steps of the processes that reported most, in time order (thinned evenly on a long run) */
  steps: StepEntry[];
  /** events, the first {@link MAX_EVENTS} of them */
  events: EventEntry[];
  /** how many events of each name the whole timeline holds */
  eventCounts: Record<string, number>;
  hellos: HelloEntry[];
  /** the process whose steps count ({@link mainProcessPid}) */
  mainPid: number | null;
  measured: TimelineMeasures;
  /** lines read and entries kept: `thinned` when the lists hold fewer entries than the file */
  lines: number;
  thinned: boolean;
  /** read from evenly spread parts of a file too long to read whole ({@link loadTimelineSpread}): its measures cover only those parts */
  sampled: boolean;
}

/** Entries kept in a timeline's sample list before it is thinned. */
export const MAX_SAMPLES = 20_000;
/** Steps kept per process before its list is thinned. */
export const MAX_STEPS_PER_PROCESS = 20_000;
/** Events kept in full. */
export const MAX_EVENTS = 5_000;
/** Processes whose steps are followed one by one (others still count in `steps`). */
const MAX_STEPPING_PROCESSES = 16;
const MAX_HELLOS = 1_024;

const num = (value: unknown): number | null => (typeof value === "number" && Number.isFinite(value) ? value : null);
const str = (value: unknown): string | null => (typeof value === "string" ? value : null);
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
  };
}

function eventOf(e: TimelineEntry): EventEntry | null {
  const name = str(e.event);
  if (name === null) return null;
  return { t: e.t, pid: num(e.pid), event: name, step: num(e.step), message: str(e.message), details: obj(e.details) ?? {} };
}

function helloOf(e: TimelineEntry): HelloEntry | null {
  const pid = num(e.pid);
  if (pid === null) return null;
  const versions: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj(e.versions) ?? {})) if (typeof v === "string") versions[k] = v;
  return { t: e.t, pid, role: str(e.role), rank: num(e.rank), framework: str(e.framework), versions };
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
  const e = obj(value);
  return e !== null && typeof e.t === "number" && Number.isFinite(e.t) && typeof e.kind === "string" ? (e as TimelineEntry) : null;
}

/**
 * Reads a timeline file line by line in bounded memory (one chunk and one line at a time), from
 * byte `from` up to byte `until`. A last line without its newline (still being written, or torn by
 * a crash) is ignored; a missing file reads as nothing. `onOffset` learns the byte offset after the
 * last whole line.
 *
 * @example
 * ```ts
 * for await (const entry of timelineEntries(path)) if (entry.kind === "end") console.log(entry.cause);
 * ```
 */
export async function* timelineEntries(
  path: string,
  options: { from?: number; until?: number; onOffset?: (offset: number) => void } = {},
): AsyncGenerator<TimelineEntry> {
  const from = options.from ?? 0;
  const until = options.until ?? Infinity;
  if (until <= from) {
    options.onOffset?.(from);
    return;
  }
  const stream = createReadStream(path, { start: from, ...(until !== Infinity ? { end: until - 1 } : {}), highWaterMark: 1 << 20 });
  let rest: Buffer | null = null;
  let offset = from;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      let buffer: Buffer = rest === null ? chunk : Buffer.concat([rest, chunk]);
      let start = 0;
      let newline = buffer.indexOf(0x0a, start);
      while (newline >= 0) {
        const entry = parseTimelineLine(buffer.toString("utf8", start, newline));
        offset += newline + 1 - start;
        start = newline + 1;
        if (entry !== null) yield entry;
        newline = buffer.indexOf(0x0a, start);
      }
      buffer = buffer.subarray(start);
      rest = buffer.length > 0 ? Buffer.from(buffer) : null;
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  options.onOffset?.(offset);
}

/**
 * The median of a stream of numbers in bounded memory: exact up to 2^18 values, then from a
 * histogram with bins 0.5 % wide (so within 0.25 % of the exact median).
 */
class StreamingMedian {
  static readonly EXACT = 1 << 18;
  #values: Float64Array = new Float64Array(1024);
  #n = 0;
  #bins: Map<number, number> | null = null;
  #zeros = 0;

  add(value: number): void {
    if (this.#bins === null) {
      if (this.#n === this.#values.length) {
        if (this.#n >= StreamingMedian.EXACT) {
          this.#bins = new Map();
          for (let i = 0; i < this.#n; i++) this.#bin(this.#values[i] as number);
          this.#values = new Float64Array(0);
        } else {
          const grown = new Float64Array(this.#values.length * 2);
          grown.set(this.#values);
          this.#values = grown;
        }
      }
      if (this.#bins === null) {
        this.#values[this.#n] = value;
        this.#n++;
        return;
      }
    }
    this.#n++;
    this.#bin(value);
  }

  #bin(value: number): void {
    if (value <= 0) {
      this.#zeros++;
      return;
    }
    const bin = Math.floor(Math.log(value) / Math.log1p(0.005));
    this.#bins?.set(bin, (this.#bins.get(bin) ?? 0) + 1);
  }

  get count(): number {
    return this.#n;
  }

  median(): number | null {
    if (this.#n === 0) return null;
    if (this.#bins === null) {
      const sorted = this.#values.slice(0, this.#n).sort();
      const mid = Math.floor(this.#n / 2);
      return this.#n % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
    }
    let seen = this.#zeros;
    if (seen > this.#n / 2) return 0;
    for (const [bin, n] of [...this.#bins.entries()].sort((a, b) => a[0] - b[0])) {
      seen += n;
      if (seen >= this.#n / 2) return Math.exp((bin + 0.5) * Math.log1p(0.005));
    }
    return null;
  }
}

/** Keeps every k-th item of a stream, k doubling whenever the list reaches its bound. */
class EvenThinning<T> {
  readonly items: T[] = [];
  #stride = 1;
  #seen = 0;
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  add(item: T): void {
    if (this.#seen++ % this.#stride !== 0) return;
    this.items.push(item);
    if (this.items.length >= this.#max) {
      let kept = 0;
      for (let i = 0; i < this.items.length; i += 2) this.items[kept++] = this.items[i] as T;
      this.items.length = kept;
      this.#stride *= 2;
    }
  }

  get thinned(): boolean {
    return this.#stride > 1;
  }
}

interface GpuSums {
  util: number;
  utilN: number;
  sm: number;
  smN: number;
  power: number;
  powerN: number;
  energyFirst: number | null;
  energyLast: number | null;
}

const newSums = (): GpuSums => ({ util: 0, utilN: 0, sm: 0, smN: 0, power: 0, powerN: 0, energyFirst: null, energyLast: null });

/** Per-GPU and per-host sums over a set of readings. */
class ReadingSums {
  readonly gpus = new Map<number, GpuSums>();
  treeCpu = 0;
  treeCpuN = 0;
  hostCpu = 0;
  hostCpuN = 0;
  readings = 0;

  add(s: SampleEntry): void {
    this.readings++;
    for (const g of s.gpus) {
      let sums = this.gpus.get(g.index);
      if (sums === undefined) this.gpus.set(g.index, (sums = newSums()));
      if (g.util !== null) {
        sums.util += g.util;
        sums.utilN++;
      }
      if (g.sm_activity !== null) {
        sums.sm += g.sm_activity;
        sums.smN++;
      }
      if (g.power_w !== null) {
        sums.power += g.power_w;
        sums.powerN++;
      }
      if (g.energy_j !== null) {
        sums.energyFirst ??= g.energy_j;
        sums.energyLast = g.energy_j;
      }
    }
    if (s.tree.cpu_percent !== null) {
      this.treeCpu += s.tree.cpu_percent;
      this.treeCpuN++;
    }
    if (s.host.cpu_percent !== null) {
      this.hostCpu += s.host.cpu_percent;
      this.hostCpuN++;
    }
  }

  addAll(other: ReadingSums): void {
    this.readings += other.readings;
    for (const [index, o] of other.gpus) {
      let sums = this.gpus.get(index);
      if (sums === undefined) this.gpus.set(index, (sums = newSums()));
      sums.util += o.util;
      sums.utilN += o.utilN;
      sums.sm += o.sm;
      sums.smN += o.smN;
      sums.power += o.power;
      sums.powerN += o.powerN;
      if (o.energyFirst !== null) sums.energyFirst ??= o.energyFirst;
      if (o.energyLast !== null) sums.energyLast = o.energyLast;
    }
    this.treeCpu += other.treeCpu;
    this.treeCpuN += other.treeCpuN;
    this.hostCpu += other.hostCpu;
    this.hostCpuN += other.hostCpuN;
  }

  /** GPU means over the given GPUs: utilization and SM activity over every reading of them; power summed over the GPUs. */
  means(
    indexes: readonly number[],
  ): Pick<TimelineMeasures, "gpu_util_mean" | "sm_activity_mean" | "power_mean_w" | "energy_j" | "tree_cpu_percent_mean" | "host_cpu_percent_mean"> {
    let util = 0;
    let utilN = 0;
    let sm = 0;
    let smN = 0;
    let power: number | null = null;
    let energy: number | null = null;
    let energyMissing = false;
    for (const index of indexes) {
      const g = this.gpus.get(index);
      if (g === undefined) continue;
      util += g.util;
      utilN += g.utilN;
      sm += g.sm;
      smN += g.smN;
      if (g.powerN > 0) power = (power ?? 0) + g.power / g.powerN;
      if (g.energyFirst !== null && g.energyLast !== null && g.energyLast > g.energyFirst) energy = (energy ?? 0) + (g.energyLast - g.energyFirst);
      else energyMissing = true;
    }
    return {
      gpu_util_mean: utilN > 0 ? util / utilN : null,
      sm_activity_mean: smN > 0 ? sm / smN : null,
      power_mean_w: power,
      energy_j: energyMissing ? null : energy,
      tree_cpu_percent_mean: this.treeCpuN > 0 ? this.treeCpu / this.treeCpuN : null,
      host_cpu_percent_mean: this.hostCpuN > 0 ? this.hostCpu / this.hostCpuN : null,
    };
  }
}

/** The steps of one kind of source, per process. */
interface StepFolds {
  steps: number;
  readonly processes: Map<number, ProcessFold>;
  readonly stepCounts: Map<number, number>;
}

/** What one stepping process measured: its steps and the readings of its steady window. */
class ProcessFold {
  steps = 0;
  steady = 0;
  samples = 0;
  wait = 0;
  busy = 0;
  readonly stepTime = new StreamingMedian();
  readonly waitTime = new StreamingMedian();
  readonly computeTime = new StreamingMedian();
  readonly sources: Record<StepSource, number> = { sdk: 0, attach: 0, progress: 0 };
  windowStart: number | null = null;
  windowEnd: number | null = null;
  readonly inWindow = new ReadingSums();
  #pending: SampleEntry[] = [];
  last: StepEntry | null = null;
  readonly kept = new EvenThinning<StepEntry>(MAX_STEPS_PER_PROCESS);

  step(s: StepEntry): void {
    this.steps++;
    this.last = s;
    this.kept.add(s);
    if (isWarmupStep(s)) return;
    this.steady++;
    const seconds = stepSeconds(s);
    if (seconds === null) return;
    this.samples += s.samples ?? 0;
    this.wait += s.wait_s ?? 0;
    this.busy += seconds;
    this.stepTime.add(seconds);
    this.waitTime.add(s.wait_s ?? 0);
    this.computeTime.add(s.compute_s ?? 0);
    this.sources[s.source]++;
    const start = s.t - seconds;
    if (this.windowStart === null || start < this.windowStart) this.windowStart = start;
    if (this.windowEnd === null || s.t > this.windowEnd) this.windowEnd = s.t;
    const later: SampleEntry[] = [];
    for (const r of this.#pending) {
      if (r.t > this.windowEnd) later.push(r);
      else if (r.t >= this.windowStart) this.inWindow.add(r);
    }
    this.#pending = later;
  }

  /** A reading waits until a steady step shows it fell inside the window (bounded: a step spans few readings). */
  reading(s: SampleEntry): void {
    this.#pending.push(s);
    if (this.#pending.length > 4096) this.#pending.shift();
  }
}

/**
 * The job's main process, whose steps define throughput: the one of rank 0 when ranks say hello,
 * else the process brim started, else the only one whose hello says `main`, else the one that
 * reported the most steps (the lowest pid on a tie); the started process when none stepped.
 *
 * @example
 * ```ts
 * mainProcessPid({ startPid: 10, stepCounts: new Map([[10, 5], [11, 9]]), hellos: [] }); // 10
 * ```
 */
export function mainProcessPid(facts: {
  startPid: number | null;
  stepCounts: ReadonlyMap<number, number>;
  hellos: readonly Pick<HelloEntry, "pid" | "rank" | "role">[];
}): number | null {
  const { startPid, stepCounts, hellos } = facts;
  if (stepCounts.size === 0) return startPid;
  const stepping = hellos.filter((h) => stepCounts.has(h.pid));
  const rank0 = stepping.find((h) => h.rank === 0);
  if (rank0 !== undefined) return rank0.pid;
  if (startPid !== null && stepCounts.has(startPid)) return startPid;
  const mains = stepping.filter((h) => h.role === "main");
  if (mains.length === 1) return mains[0]?.pid ?? null;
  return [...stepCounts.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0]?.[0] ?? null;
}

/**
 * The GPUs a job used: those whose utilization rose above 0 or whose used memory changed during the
 * run; all GPUs seen when none did.
 *
 * @example
 * ```ts
 * jobGpuIndexes(new Map([[0, { util: 97, min: 1e9, max: 9e9 }], [1, { util: 0, min: 5e8, max: 5e8 }]])); // [0]
 * ```
 */
export function jobGpuIndexes(activity: ReadonlyMap<number, { util: number; min: number; max: number }>): number[] {
  const active = [...activity.entries()].filter(([, a]) => a.util > 0 || a.max - a.min > 0).map(([i]) => i);
  return (active.length > 0 ? active : [...activity.keys()]).sort((a, b) => a - b);
}

/**
 * Folds timeline entries, in the order they were written, into a {@link Timeline} in one pass and
 * bounded memory. The live view feeds it as messages arrive; files are streamed through it.
 *
 * @example
 * ```ts
 * const fold = new TimelineFold();
 * for await (const entry of timelineEntries(path)) fold.add(entry);
 * fold.timeline().measured.samples_per_s;
 * ```
 */
export class TimelineFold {
  #start: Timeline["start"] = null;
  #end: Timeline["end"] = null;
  // Steps read from progress lines are the last resort: kept apart, and counted only while the SDK
  // and the attach layer reported none.
  readonly #measured: StepFolds = { steps: 0, processes: new Map(), stepCounts: new Map() };
  readonly #progress: StepFolds = { steps: 0, processes: new Map(), stepCounts: new Map() };
  get #steps(): number {
    return this.#counted.steps;
  }
  get #processes(): Map<number, ProcessFold> {
    return this.#counted.processes;
  }
  get #counted(): StepFolds {
    return this.#measured.steps > 0 || this.#progress.steps === 0 ? this.#measured : this.#progress;
  }
  readonly #hellos: HelloEntry[] = [];
  readonly #events: EventEntry[] = [];
  readonly #eventCounts: Record<string, number> = {};
  readonly #samples = new EvenThinning<SampleEntry>(MAX_SAMPLES);
  readonly #all = new ReadingSums();
  readonly #activity = new Map<number, { util: number; min: number; max: number }>();
  #peakGpu: number | null = null;
  #peakRss: number | null = null;
  #peakAllocated: number | null = null;
  #peakReserved: number | null = null;
  #lines = 0;
  #lastSampleT: number | null = null;
  #recent: SampleEntry[] = [];
  #sampled = false;

  /** Takes one entry; kinds this model does not know are counted and skipped. */
  add(entry: TimelineEntry): void {
    this.#lines++;
    switch (entry.kind) {
      case "sample":
        this.sample(sampleOf(entry));
        break;
      case "step": {
        const s = stepOf(entry);
        if (s !== null) this.step(s);
        break;
      }
      case "event": {
        const e = eventOf(entry);
        if (e === null) break;
        this.#eventCounts[e.event] = (this.#eventCounts[e.event] ?? 0) + 1;
        if (this.#events.length < MAX_EVENTS) this.#events.push(e);
        break;
      }
      case "hello": {
        const h = helloOf(entry);
        if (h !== null && this.#hellos.length < MAX_HELLOS) this.#hellos.push(h);
        break;
      }
      case "start":
        this.#start ??= { t: entry.t, pid: num(entry.pid) };
        break;
      case "end":
        this.#end = { t: entry.t, cause: str(entry.cause) };
        break;
      default:
        break;
    }
  }

  /** Takes one step. */
  step(s: StepEntry): void {
    const into = s.source === "progress" ? this.#progress : this.#measured;
    into.steps++;
    const peak = s.mem?.peak ?? null;
    const reserved = s.mem?.peak_reserved ?? null;
    if (peak !== null && (this.#peakAllocated === null || peak > this.#peakAllocated)) this.#peakAllocated = peak;
    if (reserved !== null && (this.#peakReserved === null || reserved > this.#peakReserved)) this.#peakReserved = reserved;
    into.stepCounts.set(s.pid, (into.stepCounts.get(s.pid) ?? 0) + 1);
    let p = into.processes.get(s.pid);
    if (p === undefined) {
      if (into.processes.size >= MAX_STEPPING_PROCESSES) return;
      into.processes.set(s.pid, (p = new ProcessFold()));
      // readings taken during this first step came before its report
      for (const r of this.#recent) p.reading(r);
    }
    p.step(s);
  }

  /** Takes one sampler reading. */
  sample(s: SampleEntry): void {
    this.#samples.add(s);
    this.#lastSampleT = s.t;
    this.#all.add(s);
    this.#recent.push(s);
    if (this.#recent.length > 256) this.#recent.shift();
    for (const p of this.#measured.processes.values()) p.reading(s);
    for (const p of this.#progress.processes.values()) p.reading(s);
    for (const g of s.gpus) {
      let a = this.#activity.get(g.index);
      if (a === undefined) this.#activity.set(g.index, (a = { util: 0, min: Infinity, max: -Infinity }));
      a.util = Math.max(a.util, g.util ?? 0, g.sm_activity ?? 0);
      if (g.used_bytes !== null) {
        if (g.used_bytes < a.min) a.min = g.used_bytes;
        if (g.used_bytes > a.max) a.max = g.used_bytes;
      }
    }
    if (s.tree.gpu_bytes !== null && (this.#peakGpu === null || s.tree.gpu_bytes > this.#peakGpu)) this.#peakGpu = s.tree.gpu_bytes;
    if (s.tree.rss_bytes !== null && (this.#peakRss === null || s.tree.rss_bytes > this.#peakRss)) this.#peakRss = s.tree.rss_bytes;
  }

  /** Notes that the entries come from parts of a file only ({@link loadTimelineSpread}). */
  markSampled(): void {
    this.#sampled = true;
  }

  /** Notes the pid brim started (the live view learns it apart from the timeline). */
  started(t: number, pid: number): void {
    this.#start ??= { t, pid };
  }

  /** Notes a hello (the live view's way in). */
  hello(h: HelloEntry): void {
    if (this.#hellos.length < MAX_HELLOS) this.#hellos.push(h);
  }

  /** Notes an event by name (the live view's way in). */
  event(e: EventEntry): void {
    this.#eventCounts[e.event] = (this.#eventCounts[e.event] ?? 0) + 1;
    if (this.#events.length < MAX_EVENTS) this.#events.push(e);
  }

  /** The main process now. */
  mainPid(): number | null {
    return mainProcessPid({ startPid: this.#start?.pid ?? null, stepCounts: this.#counted.stepCounts, hellos: this.#hellos });
  }

  /** The measures so far (cheap enough to ask at every reading: no list is copied; `medians: false` skips the medians). */
  measures(options: { medians?: boolean } = {}): TimelineMeasures {
    const mainPid = this.mainPid();
    const main = mainPid === null ? undefined : this.#processes.get(mainPid);
    const medians = options.medians !== false;
    const gpuIndexes = jobGpuIndexes(this.#activity);
    const inWindow = main !== undefined && main.inWindow.readings > 0 ? main.inWindow : this.#all;
    const window: [number, number] | null = main?.windowStart != null && main.windowEnd !== null ? [main.windowStart, main.windowEnd] : null;
    const sources = main === undefined ? [] : (Object.entries(main.sources) as [StepSource, number][]).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
    const samplesPerS = main !== undefined && main.busy > 0 && main.samples > 0 ? main.samples / main.busy : null;
    return {
      steps: this.#steps,
      steady_steps: main?.steady ?? 0,
      samples: main?.samples ?? 0,
      samples_per_s: samplesPerS,
      // the steps' source even when they carry no sample count (steps/s is then what was measured)
      throughput_source: sources[0]?.[0] ?? null,
      data_wait_share: main !== undefined && main.busy > 0 ? main.wait / main.busy : null,
      step_time_s: medians ? (main?.stepTime.median() ?? null) : null,
      wait_total_s: main?.wait ?? 0,
      compute_total_s: main === undefined ? 0 : main.busy - main.wait,
      wait_time_s: medians ? (main?.waitTime.median() ?? null) : null,
      compute_time_s: medians ? (main?.computeTime.median() ?? null) : null,
      peak_tree_gpu_bytes: this.#peakGpu,
      peak_tree_rss_bytes: this.#peakRss,
      framework_peak_allocated_bytes: this.#peakAllocated,
      framework_peak_reserved_bytes: this.#peakReserved,
      ...inWindow.means(gpuIndexes),
      oom_recoveries: this.#eventCounts.oom_recovered ?? 0,
      micro_batch: main?.last?.micro_batch ?? null,
      accumulation: main?.last?.accumulation ?? null,
      steady_window: window,
      gpu_indexes: gpuIndexes,
    };
  }

  /** The timeline so far, measured by this module's definitions. */
  timeline(): Timeline {
    const mainPid = this.mainPid();
    const byTime = (a: { t: number }, b: { t: number }): number => a.t - b.t;
    const steps = [...this.#processes.values()].flatMap((p) => p.kept.items).sort(byTime);
    const samples = [...this.#samples.items];
    if (samples.some((s, i) => i > 0 && s.t < (samples[i - 1] as SampleEntry).t)) samples.sort(byTime);
    return {
      start: this.#start,
      end: this.#end,
      samples,
      steps,
      events: [...this.#events].sort(byTime),
      eventCounts: { ...this.#eventCounts },
      hellos: [...this.#hellos].sort(byTime),
      mainPid,
      lines: this.#lines,
      thinned: this.#sampled || this.#samples.thinned || [...this.#processes.values()].some((p) => p.kept.thinned),
      sampled: this.#sampled,
      measured: this.measures(),
    };
  }

  /** When the last reading was taken. */
  get lastSampleT(): number | null {
    return this.#lastSampleT;
  }
}

/**
 * A timeline from entries already in memory (tests, a tune's short trials).
 *
 * @example
 * ```ts
 * readTimeline([{ t: 1, kind: "start", pid: 4 }]).mainPid; // 4
 * ```
 */
export function readTimeline(entries: Iterable<TimelineEntry>): Timeline {
  const fold = new TimelineFold();
  for (const entry of entries) fold.add(entry);
  return fold.timeline();
}

/**
 * A timeline file read as a stream in bounded memory ({@link timelineEntries}); a missing file is an
 * empty timeline.
 *
 * @example
 * ```ts
 * const tl = await loadTimeline(join(store.runDir(id), "timeline.ndjson"));
 * ```
 */
export async function loadTimeline(path: string, options: { until?: number; onOffset?: (offset: number) => void } = {}): Promise<Timeline> {
  const fold = new TimelineFold();
  for await (const entry of timelineEntries(path, options)) fold.add(entry);
  return fold.timeline();
}

/**
 * A timeline for a page that must answer fast: read whole when it is at most `budgetBytes`, else
 * from `parts` evenly spread windows of the file (the first and the last included) that add up to
 * `budgetBytes` — `sampled` is then true and its measures cover only what was read. `offset` is
 * where a follower resumes: just after the last whole line.
 *
 * @example
 * ```ts
 * const { timeline, offset } = await loadTimelineSpread(path, { budgetBytes: 32 * 2 ** 20 });
 * ```
 */
export async function loadTimelineSpread(
  path: string,
  options: { budgetBytes: number; parts?: number; until?: number; fold?: TimelineFold },
): Promise<{ timeline: Timeline; offset: number; size: number }> {
  const fold = options.fold ?? new TimelineFold();
  let handle;
  try {
    handle = await open(path, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { timeline: fold.timeline(), offset: 0, size: 0 };
    throw error;
  }
  try {
    const size = Math.min((await handle.stat()).size, options.until ?? Infinity);
    if (size <= options.budgetBytes) {
      let offset = 0;
      for await (const entry of timelineEntries(path, { until: size, onOffset: (o) => (offset = o) })) fold.add(entry);
      return { timeline: fold.timeline(), offset, size };
    }
    fold.markSampled();
    const parts = Math.max(2, options.parts ?? 256);
    const window = Math.max(4096, Math.floor(options.budgetBytes / parts));
    const buffer = Buffer.alloc(window);
    let offset = 0;
    for (let i = 0; i < parts; i++) {
      const at = Math.floor((i * (size - window)) / (parts - 1));
      const { bytesRead } = await handle.read(buffer, 0, window, at);
      const last = buffer.lastIndexOf(0x0a, bytesRead - 1);
      if (last < 0) continue;
      let from = at === 0 ? 0 : buffer.indexOf(0x0a) + 1;
      while (from <= last) {
        const newline = buffer.indexOf(0x0a, from);
        const entry = parseTimelineLine(buffer.toString("utf8", from, newline));
        if (entry !== null) fold.add(entry);
        from = newline + 1;
      }
      offset = at + last + 1;
    }
    return { timeline: fold.timeline(), offset, size };
  } finally {
    await handle.close();
  }
}

/**
 * Whether a step is warm-up, left out of every steady-state number: the one rule, shared with the
 * tuner's trial window (src/tune/window.ts). The reporter flags warm-up steps (the SDK and the
 * attach flag the first `BRIM_WARMUP` steps; progress lines are flagged by the runner).
 *
 * @example
 * ```ts
 * isWarmupStep({ warmup: true }); // true
 * ```
 */
export function isWarmupStep(step: { warmup: boolean }): boolean {
  return step.warmup;
}

/**
 * The steady steps of the main process kept in the timeline's list (thinned on a long run: count
 * them with `measured.steady_steps`).
 *
 * @example
 * ```ts
 * steadySteps(tl).map(stepSeconds);
 * ```
 */
export function steadySteps(tl: Timeline): StepEntry[] {
  return tl.steps.filter((s) => s.pid === tl.mainPid && !isWarmupStep(s));
}

/**
 * The steps of the main process kept in the timeline's list.
 *
 * @example
 * ```ts
 * mainSteps(tl).length;
 * ```
 */
export function mainSteps(tl: Timeline): StepEntry[] {
  return tl.steps.filter((s) => s.pid === tl.mainPid);
}

/**
 * The readings taken during the steady window (all readings when the window holds none).
 *
 * @example
 * ```ts
 * steadySamples(tl).length;
 * ```
 */
export function steadySamples(tl: Timeline): SampleEntry[] {
  const window = tl.measured.steady_window;
  if (window === null) return tl.samples;
  const inside = tl.samples.filter((s) => s.t >= window[0] && s.t <= window[1]);
  return inside.length > 0 ? inside : tl.samples;
}

/**
 * The numbers of a run (run.json's summary) by this module's definitions, from its timeline, the
 * peaks the guard tracked over every reading (the timeline keeps two readings a second) and the
 * job's wall time. A number brim could not measure is `null`, never 0.
 *
 * @example
 * ```ts
 * summaryOf(tl, { treeGpuBytes: null, treeRssBytes: 2e9 }, 61.5).samples_per_s;
 * ```
 */
export function summaryOf(tl: Timeline, peaks: LivePeaks, durationS: number): RunSummary {
  const m = tl.measured;
  return {
    duration_s: durationS,
    steps: m.steps,
    steady_steps: m.steady_steps,
    samples: m.samples,
    samples_per_s: m.samples_per_s,
    throughput_source: m.throughput_source,
    data_wait_share: m.data_wait_share,
    step_time_s: m.step_time_s,
    peak_tree_gpu_bytes: maxKnown(peaks.treeGpuBytes, m.peak_tree_gpu_bytes),
    peak_tree_rss_bytes: maxKnown(peaks.treeRssBytes, m.peak_tree_rss_bytes),
    framework_peak_allocated_bytes: m.framework_peak_allocated_bytes,
    framework_peak_reserved_bytes: m.framework_peak_reserved_bytes,
    gpu_util_mean: m.gpu_util_mean,
    sm_activity_mean: m.sm_activity_mean,
    power_mean_w: m.power_mean_w,
    energy_j: m.energy_j,
    energy_j_per_sample: m.energy_j !== null && m.samples > 0 ? m.energy_j / m.samples : null,
    oom_recoveries: m.oom_recoveries,
    micro_batch: m.micro_batch,
    accumulation: m.accumulation,
  };
}

function maxKnown(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.max(a, b);
}
