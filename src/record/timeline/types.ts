/**
 * The timeline's types: the typed entries of timeline.ndjson (readings, steps, events, hellos)
 * and what a timeline measured ({@link Timeline}, {@link TimelineMeasures}).
 *
 * @module
 */
import type { RunSummary } from "../types.ts";

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
  /** attach: host seconds inside backward() in the step, where DDP's all-reduce waits for the slowest rank; absent when unknown */
  backward_s?: number | null;
  /** the job's own scalars logged in the step (brim.log's extra fields, Lightning's self.log, the HF Trainer's log); absent when none */
  metrics?: Record<string, number>;
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
  /** the rank on its node (env LOCAL_RANK) */
  local_rank: number | null;
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
  /** each rank's own figures when two or more ranks stepped (torchrun, DDP), by rank; else empty */
  ranks: RankMeasures[];
}

/**
 * One rank's figures: its optimizer steps, its own samples/s over its steady steps, and the medians
 * of its steady steps' wall time, data wait and compute (a straggler shows in its compute; under DDP
 * every rank's step time follows the slowest).
 *
 * @example
 * ```ts
 * readTimeline(entries).measured.ranks.map((r: RankMeasures) => r.compute_time_s);
 * ```
 */
export interface RankMeasures {
  rank: number;
  local_rank: number | null;
  pid: number;
  steps: number;
  steady_steps: number;
  samples_per_s: number | null;
  step_time_s: number | null;
  wait_time_s: number | null;
  compute_time_s: number | null;
  /**
   * median host seconds of its own work in a step: the step less data wait and backward() (where
   * DDP's all-reduce waits for the slowest rank); null when brim did not time backward
   */
  own_time_s: number | null;
  /** Σ data wait ÷ Σ step time over its steady steps */
  data_wait_share: number | null;
  /** the framework's peak allocated bytes this rank reported (GPU; null on CPU) */
  peak_allocated_bytes: number | null;
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
