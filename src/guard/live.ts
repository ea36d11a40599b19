import type { ChannelMessage } from "../job/channel.ts";
import { stepOf, stepSeconds, TimelineFold, type StepSource } from "../record/timeline/index.ts";
import type { TimelineEntry } from "../record/types.ts";

/** What the live view, the Prometheus endpoint and the tuner's progress show about a running job. */
export interface LiveState {
  elapsedS: number;
  steps: number;
  /** Steps the budget allows (per process), when known. */
  totalSteps: number | null;
  /** Samples per second over the recent steady steps of the main process; with two or more ranks, the sum of the ranks' own (the job's, or on one node of many, that node's share). */
  samplesPerS: number | null;
  /** With two or more ranks (torchrun, accelerate): each rank's own figures over its recent steady steps, by rank. */
  ranks?: readonly RankLive[];
  /** Share of recent step time spent waiting for data. */
  waitShare: number | null;
  /** The run so far by the timeline model's definitions (what the summary will say): throughput over all steady steps of the main process, */
  steadySamplesPerS?: number | null;
  /** who measured those steps, */
  throughputSource?: StepSource | null;
  /** data wait over the same steps, */
  steadyWaitShare?: number | null;
  /** GPU means over the job's GPUs in the steady window, from the readings the timeline keeps, */
  gpuUtilMean?: number | null;
  smActivityMean?: number | null;
  /** and the peaks of the process tree (NVML GPU memory; RSS) over every reading. */
  peakTreeGpuBytes?: number | null;
  peakTreeRssBytes?: number | null;
  etaS: number | null;
  memUsedBytes: number | null;
  memPeakBytes: number | null;
  capBytes: number | null;
  capScope: "gpu" | "ram";
  gpuUtil: number | null;
  smActivity: number | null;
  powerW: number | null;
  cpuPercent: number | null;
  processes: number | null;
  microBatch: number | null;
  accumulation: number | null;
  loss: number | null;
  oomRecoveries: number;
  shrinkRequests: number;
  lastEvent: string | null;
  /** Unix seconds the job started. */
  startTimeS?: number;
  /** The last reading of each GPU of the job, by NVML index. */
  perGpu?: readonly GpuLiveReading[];
}

/** One GPU's last reading in the live state. @example const g: GpuLiveReading = { index: 0, util: 97, smActivity: null, powerW: 310, usedBytes: 2 ** 34 }; */
export interface GpuLiveReading {
  index: number;
  util: number | null;
  smActivity: number | null;
  powerW: number | null;
  usedBytes: number | null;
}

/**
 * One rank's live figures.
 *
 * @example
 * ```ts
 * const r: RankLive = { rank: 1, localRank: 1, pid: 4242, steps: 120, samplesPerS: 950, waitShare: 0.02 };
 * ```
 */
export interface RankLive {
  rank: number;
  localRank: number | null;
  /** the node (GROUP_RANK, NODE_RANK or SLURM_NODEID) */
  node: number | null;
  /** what every node of the launch shares (torchrun's rendezvous id, SLURM_JOB_ID): the `job` to sum by */
  launchId: string | null;
  pid: number;
  steps: number;
  samplesPerS: number | null;
  waitShare: number | null;
}

/** The part of a sampler reading the live state uses. */
export interface LiveReading {
  t: number;
  usedBytes: number | null;
  /** the process tree's GPU memory and RSS, for the peaks (optional: older callers) */
  treeGpuBytes?: number | null;
  treeRssBytes?: number | null;
  gpuUtil: number | null;
  smActivity: number | null;
  powerW: number | null;
  cpuPercent: number | null;
  processes: number | null;
  perGpu?: readonly GpuLiveReading[];
}

const RECENT_STEPS = 20;
const finite = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value);
const MAX_RECENT_PROCESSES = 16;

/**
 * Folds SDK messages and sampler readings into the {@link LiveState} of a running job.
 *
 * @example
 * ```ts
 * const live = new LiveTracker({ startedAt: Date.now() / 1000, capBytes: null, capScope: "ram", totalSteps: 100 });
 * live.message(stepMessage);
 * live.snapshot(Date.now() / 1000).samplesPerS;
 * ```
 */
export class LiveTracker {
  #startedAt: number;
  #state: LiveState;
  #fold = new TimelineFold();
  #recent = new Map<number, { samples: number; wait: number; busy: number }[]>();
  /** rank → its process now (a launcher's restart gives a rank a new one), and each process's steps */
  #rankPids = new Map<number, { pid: number; localRank: number | null; node: number | null; launchId: string | null }>();
  #stepsByPid = new Map<number, number>();
  /** a step came from the SDK or the attach (progress-line steps stop counting, as in the summary) */
  #measured = false;
  #peakGpu: number | null = null;
  #peakRss: number | null = null;

  constructor(init: { startedAt: number; capBytes: number | null; capScope: "gpu" | "ram"; totalSteps: number | null }) {
    this.#startedAt = init.startedAt;
    this.#state = {
      elapsedS: 0,
      steps: 0,
      totalSteps: init.totalSteps,
      samplesPerS: null,
      waitShare: null,
      steadySamplesPerS: null,
      throughputSource: null,
      steadyWaitShare: null,
      gpuUtilMean: null,
      smActivityMean: null,
      peakTreeGpuBytes: null,
      peakTreeRssBytes: null,
      etaS: null,
      memUsedBytes: null,
      memPeakBytes: null,
      capBytes: init.capBytes,
      capScope: init.capScope,
      gpuUtil: null,
      smActivity: null,
      powerW: null,
      cpuPercent: null,
      processes: null,
      microBatch: null,
      accumulation: null,
      loss: null,
      oomRecoveries: 0,
      shrinkRequests: 0,
      lastEvent: null,
    };
  }

  /** Notes the process brim started: the main process unless ranks or steps say otherwise. */
  started(t: number, pid: number): void {
    this.#fold.started(t, pid);
  }

  /** Takes one SDK message. */
  message(message: ChannelMessage): void {
    if (message.type === "hello") {
      this.#fold.hello({
        t: message.t,
        pid: message.pid,
        role: typeof message.role === "string" ? message.role : null,
        rank: finite(message.rank) ? message.rank : null,
        local_rank: finite(message.local_rank) ? message.local_rank : null,
        framework: null,
        versions: {},
      });
      if (message.role === "main" && finite(message.rank))
        this.#rankPids.set(message.rank, {
          pid: message.pid,
          localRank: finite(message.local_rank) ? message.local_rank : null,
          node: finite(message.group_rank) ? message.group_rank : null,
          launchId: typeof message.launch_id === "string" ? message.launch_id : null,
        });
      return;
    }
    if (message.type === "event") {
      const kind = String(message.kind);
      const details = typeof message.details === "object" && message.details !== null ? (message.details as Record<string, unknown>) : {};
      this.#fold.event({ t: message.t, pid: message.pid, event: kind, step: null, message: null, details: kind === "rank_known" ? details : {} });
      if (kind === "rank_known" && finite(details.rank) && ![...this.#rankPids.values()].some((r) => r.pid === message.pid))
        this.#rankPids.set(details.rank, { pid: message.pid, localRank: finite(details.local_rank) ? details.local_rank : null, node: null, launchId: null });
      if (kind === "oom_recovered") this.#state.oomRecoveries++;
      if (kind !== "knob_read" && kind !== "rank_known") this.#state.lastEvent = typeof message.message === "string" ? message.message : kind;
      return;
    }
    if (message.type !== "step") return;
    const step = stepOf({ ...message, kind: "step" });
    if (step === null) return;
    this.#fold.step(step);
    if (!this.#countsLikeSummary(step.source)) return;
    this.#stepsByPid.set(step.pid, (this.#stepsByPid.get(step.pid) ?? 0) + 1);
    let recent = this.#recent.get(step.pid);
    if (recent === undefined) {
      if (this.#recent.size >= MAX_RECENT_PROCESSES) return;
      this.#recent.set(step.pid, (recent = []));
    }
    const seconds = stepSeconds(step);
    if (!step.warmup && seconds !== null) {
      recent.push({ samples: step.samples ?? 0, wait: step.wait_s ?? 0, busy: seconds });
      if (recent.length > RECENT_STEPS) recent.shift();
    }
    if (step.pid !== this.#fold.mainPid()) return;
    const state = this.#state;
    state.steps++;
    if (step.micro_batch !== null) state.microBatch = step.micro_batch;
    if (step.accumulation !== null) state.accumulation = step.accumulation;
    if (typeof step.loss === "number") state.loss = step.loss;
    if (step.warmup) return;
    const totals = recent.reduce((sum, r) => ({ samples: sum.samples + r.samples, wait: sum.wait + r.wait, busy: sum.busy + r.busy }), {
      samples: 0,
      wait: 0,
      busy: 0,
    });
    state.samplesPerS = totals.busy > 0 && totals.samples > 0 ? totals.samples / totals.busy : null;
    state.waitShare = totals.busy > 0 ? totals.wait / totals.busy : null;
    if (this.#rankPids.size >= 2) {
      state.ranks = this.#liveRanks();
      // data-parallel ranks each train on their own samples: the job's rate is their sum
      if (state.ranks.every((r) => r.samplesPerS !== null)) state.samplesPerS = state.ranks.reduce((n, r) => n + (r.samplesPerS ?? 0), 0);
    }
    if (state.totalSteps !== null && totals.busy > 0 && recent.length > 0)
      state.etaS = Math.max(0, state.totalSteps - state.steps) * (totals.busy / recent.length);
  }

  /**
   * Whether a step counts in the live view as in the summary: steps read from progress lines (a
   * validation or sanity-check bar among them) only while the SDK and the attach have reported none;
   * once they report, what the progress lines added is dropped, as the timeline model drops it.
   */
  #countsLikeSummary(source: StepSource): boolean {
    if (source === "progress") return !this.#measured;
    if (!this.#measured) {
      this.#measured = true;
      if (this.#state.steps > 0) {
        this.#state.steps = 0;
        this.#state.samplesPerS = null;
        this.#state.waitShare = null;
        this.#state.etaS = null;
        this.#recent.clear();
        this.#stepsByPid.clear();
      }
    }
    return true;
  }

  #liveRanks(): RankLive[] {
    return [...this.#rankPids.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([rank, { pid, localRank, node, launchId }]) => {
        const recent = this.#recent.get(pid) ?? [];
        const t = recent.reduce((sum, r) => ({ samples: sum.samples + r.samples, wait: sum.wait + r.wait, busy: sum.busy + r.busy }), {
          samples: 0,
          wait: 0,
          busy: 0,
        });
        return {
          rank,
          localRank,
          node,
          launchId,
          pid,
          steps: this.#stepsByPid.get(pid) ?? 0,
          samplesPerS: t.busy > 0 && t.samples > 0 ? t.samples / t.busy : null,
          waitShare: t.busy > 0 ? t.wait / t.busy : null,
        };
      });
  }

  /** Takes one reading as the timeline keeps it (a `sample` entry): the GPU means come from these, as the summary's do. */
  sample(entry: TimelineEntry): void {
    this.#fold.add(entry);
  }

  /** Takes one sampler reading. */
  reading(reading: LiveReading): void {
    const state = this.#state;
    state.memUsedBytes = reading.usedBytes;
    if (reading.usedBytes !== null) state.memPeakBytes = Math.max(state.memPeakBytes ?? 0, reading.usedBytes);
    if (finite(reading.treeGpuBytes)) this.#peakGpu = Math.max(this.#peakGpu ?? 0, reading.treeGpuBytes);
    if (finite(reading.treeRssBytes)) this.#peakRss = Math.max(this.#peakRss ?? 0, reading.treeRssBytes);
    state.gpuUtil = reading.gpuUtil;
    state.smActivity = reading.smActivity;
    state.powerW = reading.powerW;
    state.cpuPercent = reading.cpuPercent;
    state.processes = reading.processes;
    if (reading.perGpu !== undefined) state.perGpu = reading.perGpu;
  }

  /** Notes a shrink request brim sent. */
  shrinkRequested(): void {
    this.#state.shrinkRequests++;
    this.#state.lastEvent = "brim asked the job to shrink its micro-batch (near the cap)";
  }

  /** The state now. */
  snapshot(now: number): LiveState {
    const m = this.#fold.measures({ medians: false });
    return {
      ...this.#state,
      elapsedS: now - this.#startedAt,
      startTimeS: this.#startedAt,
      steadySamplesPerS: m.samples_per_s,
      throughputSource: m.throughput_source,
      steadyWaitShare: m.data_wait_share,
      gpuUtilMean: m.gpu_util_mean,
      smActivityMean: m.sm_activity_mean,
      peakTreeGpuBytes: this.#peakGpu === null ? m.peak_tree_gpu_bytes : Math.max(this.#peakGpu, m.peak_tree_gpu_bytes ?? 0),
      peakTreeRssBytes: this.#peakRss === null ? m.peak_tree_rss_bytes : Math.max(this.#peakRss, m.peak_tree_rss_bytes ?? 0),
    };
  }
}
