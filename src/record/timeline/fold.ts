/**
 * The fold: timeline entries, in the order they were written, into a {@link Timeline} in one pass
 * and bounded memory, by the definitions of the main process, steady steps, the steady window and the
 * job's GPUs.
 *
 * @module
 */
import type { TimelineEntry } from "../types.ts";
import { eventOf, helloOf, isWarmupStep, num, sampleOf, stepOf, stepSeconds, str } from "./entries.ts";
import { StreamingMedian } from "../../stats.ts";
import { EvenThinning, ReadingSums } from "./stats.ts";
import type { EventEntry, HelloEntry, SampleEntry, StepEntry, StepSource, Timeline, TimelineMeasures, RankMeasures } from "./types.ts";

/** Entries kept in a timeline's sample list before it is thinned. */
export const MAX_SAMPLES = 20_000;
/** Steps kept per process before its list is thinned. */
export const MAX_STEPS_PER_PROCESS = 20_000;
/** Events kept in full. */
export const MAX_EVENTS = 5_000;
/** Processes whose steps are followed one by one (others still count in `steps`). */
const MAX_STEPPING_PROCESSES = 16;
const MAX_HELLOS = 1_024;

/** The steps of one kind of source, per process. */
interface StepFolds {
  steps: number;
  samples: number;
  readonly processes: Map<number, ProcessFold>;
  readonly stepCounts: Map<number, number>;
}

/** Environment steps a second between the first and the last steady step that carried a count; null without two. */
function envStepsPerS(p: ProcessFold | undefined): number | null {
  const [a, b] = [p?.envFirst, p?.envLast];
  if (a == null || b == null || b.t <= a.t || b.total <= a.total) return null;
  return (b.total - a.total) / (b.t - a.t);
}

/** What one stepping process measured: its steps and the readings of its steady window. */
class ProcessFold {
  steps = 0;
  steady = 0;
  steadySamples = 0;
  wait = 0;
  busy = 0;
  peakAllocated: number | null = null;
  readonly stepTime = new StreamingMedian();
  readonly waitTime = new StreamingMedian();
  readonly computeTime = new StreamingMedian();
  readonly ownTime = new StreamingMedian();
  readonly sources: Record<StepSource, number> = { sdk: 0, attach: 0, progress: 0 };
  windowStart: number | null = null;
  windowEnd: number | null = null;
  readonly inWindow = new ReadingSums();
  #pending: SampleEntry[] = [];
  last: StepEntry | null = null;
  /** the environment steps so far (a step's env_steps) at the first and the last steady step that carried them */
  envFirst: { t: number; total: number } | null = null;
  envLast: { t: number; total: number } | null = null;
  readonly kept = new EvenThinning<StepEntry>(MAX_STEPS_PER_PROCESS);

  step(s: StepEntry): void {
    this.steps++;
    this.last = s;
    this.kept.add(s);
    const peak = s.mem?.peak ?? null;
    if (peak !== null && (this.peakAllocated === null || peak > this.peakAllocated)) this.peakAllocated = peak;
    if (isWarmupStep(s)) return;
    this.steady++;
    const seconds = stepSeconds(s);
    if (seconds === null) return;
    this.steadySamples += s.samples ?? 0;
    this.wait += s.wait_s ?? 0;
    this.busy += seconds;
    this.stepTime.add(seconds);
    this.waitTime.add(s.wait_s ?? 0);
    this.computeTime.add(s.compute_s ?? 0);
    if (s.backward_s != null) this.ownTime.add(Math.max(0, seconds - (s.wait_s ?? 0) - s.backward_s));
    this.sources[s.source]++;
    const envTotal = s.metrics?.["env_steps"];
    if (envTotal !== undefined) {
      this.envFirst ??= { t: s.t, total: envTotal };
      this.envLast = { t: s.t, total: envTotal };
    }
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
  // after a launcher's restart the new round's rank 0 is the one that counts
  const rank0 = stepping.findLast((h) => h.rank === 0);
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
  readonly #measured: StepFolds = { steps: 0, samples: 0, processes: new Map(), stepCounts: new Map() };
  readonly #progress: StepFolds = { steps: 0, samples: 0, processes: new Map(), stepCounts: new Map() };
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
        if (e.event === "rank_known") this.#rankKnown(e);
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
    into.samples += s.samples ?? 0;
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
    if (e.event === "rank_known") this.#rankKnown(e);
  }

  /** A rank learnt after the hello (a launcher that sets no RANK: Lightning's own DDP). */
  #rankKnown(e: EventEntry): void {
    const rank = e.details.rank;
    if (typeof rank !== "number" || e.pid === null) return;
    const local = typeof e.details.local_rank === "number" ? e.details.local_rank : null;
    const at = this.#hellos.findIndex((h) => h.pid === e.pid);
    if (at >= 0) {
      const h = this.#hellos[at] as HelloEntry;
      this.#hellos[at] = { ...h, rank: h.rank ?? rank, local_rank: h.local_rank ?? local };
    }
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
    const samplesPerS = main !== undefined && main.busy > 0 && main.steadySamples > 0 ? main.steadySamples / main.busy : null;
    // Ranks step in lockstep: the job's steps are rank 0's, and its throughput the sum of the
    // data-parallel ranks' own rates (each over its own steady steps).
    const ranks = this.#ranks(medians);
    const global = ranks.length > 0 && ranks.every((r) => r.samples_per_s !== null);
    return {
      steps: ranks.length > 0 ? (main?.steps ?? this.#steps) : this.#steps,
      steady_steps: main?.steady ?? 0,
      samples: this.#counted.samples,
      steady_samples: global ? ranks.reduce((n, r) => n + (this.#processes.get(r.pid)?.steadySamples ?? 0), 0) : (main?.steadySamples ?? 0),
      samples_per_s: global ? ranks.reduce((n, r) => n + (r.samples_per_s ?? 0), 0) : samplesPerS,
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
      env_steps_per_s: envStepsPerS(main),
      steady_window: window,
      gpu_indexes: gpuIndexes,
      ranks,
    };
  }

  #ranks(medians = true): RankMeasures[] {
    const seen = new Map<number, RankMeasures>();
    for (const h of this.#hellos) {
      const p = this.#processes.get(h.pid);
      // hellos come in order: a restarted round's rank replaces the one before it
      if (h.rank === null || p === undefined) continue;
      seen.set(h.rank, {
        rank: h.rank,
        local_rank: h.local_rank,
        pid: h.pid,
        steps: p.steps,
        steady_steps: p.steady,
        samples_per_s: p.busy > 0 && p.steadySamples > 0 ? p.steadySamples / p.busy : null,
        step_time_s: medians ? p.stepTime.median() : null,
        wait_time_s: medians ? p.waitTime.median() : null,
        compute_time_s: medians ? p.computeTime.median() : null,
        own_time_s: medians ? p.ownTime.median() : null,
        data_wait_share: p.busy > 0 ? p.wait / p.busy : null,
        peak_allocated_bytes: p.peakAllocated,
      });
    }
    return seen.size >= 2 ? [...seen.values()].sort((a, b) => a.rank - b.rank) : [];
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
