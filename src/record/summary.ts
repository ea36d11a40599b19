import type { RunSummary, TimelineEntry } from "./types.ts";

/** A step as the SDK reports it and the timeline keeps it. */
export interface StepEntry extends TimelineEntry {
  kind: "step";
  pid: number;
  step: number;
  samples: number | null;
  wait_s: number | null;
  compute_s: number | null;
  warmup: boolean | null;
  micro_batch: number | null;
  accumulation: number | null;
  loss: number | string | null;
  mem: { peak?: number | null; peak_reserved?: number | null; peak_rss?: number | null; allocated?: number | null; reserved?: number | null; rss?: number | null } | null;
  /** Who measured the step; missing means the SDK. */
  source?: "sdk" | "attach" | "progress";
}

/**
 * The timeline without steps read from progress lines when the SDK or the attach reported any
 * (progress lines are the last resort, never mixed with measured steps).
 *
 * @example
 * ```ts
 * measuredTimeline(timeline).filter((entry) => entry.kind === "step");
 * ```
 */
export function measuredTimeline(timeline: readonly TimelineEntry[]): readonly TimelineEntry[] {
  const progress = (entry: TimelineEntry): boolean => entry.kind === "step" && entry.source === "progress";
  if (!timeline.some((entry) => entry.kind === "step" && !progress(entry))) return timeline;
  return timeline.filter((entry) => !progress(entry));
}

/** Who measured a step: "sdk" when the entry does not say. */
export function stepSource(entry: TimelineEntry): "sdk" | "attach" | "progress" {
  return entry.source === "attach" || entry.source === "progress" ? entry.source : "sdk";
}

/** A sampler reading as the timeline keeps it (docs/run-store.md). */
export interface SampleEntry extends TimelineEntry {
  kind: "sample";
  tree: { pids: number; rss_bytes: number; cpu_percent: number | null; gpu_bytes: number | null } | null;
  gpus: { index: number; used_bytes: number; total_bytes: number; util: number | null; sm_activity: number | null; power_w: number | null; energy_j?: number | null }[];
}

/** Peaks the guard tracked over every reading (the timeline keeps only some of them). */
export interface LivePeaks {
  treeGpuBytes: number | null;
  treeRssBytes: number | null;
}

/**
 * The job's main process, whose steps define throughput: the one of rank 0 when ranks say hello,
 * else the process brim started, else the only one whose hello says `main`, else the one that
 * reported the most steps. The one rule for the summary, the tuner and the analysis.
 *
 * @example
 * ```ts
 * mainProcessPid(timeline); // 4242
 * ```
 */
export function mainProcessPid(fullTimeline: readonly TimelineEntry[]): number | null {
  const timeline = measuredTimeline(fullTimeline);
  const stepping = new Map<number, number>();
  for (const entry of timeline) if (entry.kind === "step" && typeof entry.pid === "number") stepping.set(entry.pid, (stepping.get(entry.pid) ?? 0) + 1);
  const start = timeline.find((entry) => entry.kind === "start" && typeof entry.pid === "number");
  const startPid = start ? (start.pid as number) : null;
  if (stepping.size === 0) return startPid;
  const hellos = timeline.filter((entry) => entry.kind === "hello" && typeof entry.pid === "number" && stepping.has(entry.pid));
  const rank0 = hellos.find((hello) => hello.rank === 0);
  if (rank0 !== undefined) return rank0.pid as number;
  if (startPid !== null && stepping.has(startPid)) return startPid;
  const mains = hellos.filter((hello) => hello.role === "main");
  if (mains.length === 1) return mains[0]?.pid as number;
  return [...stepping.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0]?.[0] ?? null;
}

/**
 * The steps of the job's main process ({@link mainProcessPid}).
 *
 * @example
 * ```ts
 * mainProcessSteps(timeline).length;
 * ```
 */
export function mainProcessSteps(fullTimeline: readonly TimelineEntry[]): StepEntry[] {
  const timeline = measuredTimeline(fullTimeline);
  const pid = mainProcessPid(timeline);
  return timeline.filter((entry): entry is StepEntry => entry.kind === "step" && entry.pid === pid);
}

const finite = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value);
const mean = (values: number[]): number | null => (values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length);
const maxOf = (values: number[]): number | null => (values.length === 0 ? null : Math.max(...values));

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/**
 * The numbers of a run (docs/run-store.md "summary"), from its timeline and the peaks the guard
 * tracked live. A number brim could not measure is `null`, never 0.
 *
 * @example
 * ```ts
 * const summary = summarizeRun(timeline, { treeGpuBytes: null, treeRssBytes: 2e9 }, 61.5);
 * summary.samples_per_s;
 * ```
 */
export function summarizeRun(fullTimeline: readonly TimelineEntry[], peaks: LivePeaks, durationS: number): RunSummary {
  const timeline = measuredTimeline(fullTimeline);
  const allSteps = timeline.filter((entry) => entry.kind === "step");
  const steps = mainProcessSteps(timeline);
  const steady = steps.filter((step) => step.warmup !== true);
  let samples = 0;
  let wait = 0;
  let busy = 0;
  const stepTimes: number[] = [];
  for (const step of steady) {
    const seconds = (finite(step.wait_s) ? step.wait_s : 0) + (finite(step.compute_s) ? step.compute_s : 0);
    samples += finite(step.samples) ? step.samples : 0;
    wait += finite(step.wait_s) ? step.wait_s : 0;
    busy += seconds;
    stepTimes.push(seconds);
  }
  const first = steady[0];
  const last = steady[steady.length - 1];
  const inSteady = (t: number): boolean => first !== undefined && last !== undefined && t >= first.t - (stepTimes[0] ?? 0) && t <= last.t;
  const samplesInTimeline = timeline.filter((entry): entry is SampleEntry => entry.kind === "sample");
  const steadySamples = samplesInTimeline.filter((sample) => inSteady(sample.t));
  const gpuValues = (pick: (gpu: SampleEntry["gpus"][number]) => number | null | undefined): number[] =>
    steadySamples.flatMap((sample) => sample.gpus.map(pick).filter(finite));
  const energyJ = energyUsed(steadySamples);
  const frameworkPeaks = (key: "peak" | "peak_reserved"): number | null =>
    maxOf(allSteps.map((step) => (step.mem as StepEntry["mem"])?.[key]).filter(finite));
  const lastStep = steps[steps.length - 1];
  const powerPerSample = steadySamples
    .map((sample) => sample.gpus.map((gpu) => gpu.power_w).filter(finite))
    .filter((powers) => powers.length > 0)
    .map((powers) => powers.reduce((a, b) => a + b, 0));
  return {
    duration_s: durationS,
    steps: allSteps.length,
    steady_steps: steady.length,
    samples,
    samples_per_s: busy > 0 && samples > 0 ? samples / busy : null,
    data_wait_share: busy > 0 ? wait / busy : null,
    step_time_s: median(stepTimes),
    peak_tree_gpu_bytes: peaks.treeGpuBytes ?? maxOf(samplesInTimeline.map((s) => s.tree?.gpu_bytes).filter(finite)),
    peak_tree_rss_bytes: peaks.treeRssBytes ?? maxOf(samplesInTimeline.map((s) => s.tree?.rss_bytes).filter(finite)),
    framework_peak_allocated_bytes: frameworkPeaks("peak"),
    framework_peak_reserved_bytes: frameworkPeaks("peak_reserved"),
    gpu_util_mean: mean(gpuValues((gpu) => gpu.util)),
    sm_activity_mean: mean(gpuValues((gpu) => gpu.sm_activity)),
    power_mean_w: mean(powerPerSample),
    energy_j: energyJ,
    energy_j_per_sample: energyJ !== null && samples > 0 ? energyJ / samples : null,
    oom_recoveries: timeline.filter((entry) => entry.kind === "event" && entry.event === "oom_recovered").length,
    micro_batch: lastStep && finite(lastStep.micro_batch) ? lastStep.micro_batch : null,
    accumulation: lastStep && finite(lastStep.accumulation) ? lastStep.accumulation : null,
    throughput_source: first !== undefined ? stepSource(first) : null,
  };
}

function energyUsed(samples: readonly SampleEntry[]): number | null {
  const withEnergy = samples.filter((sample) => sample.gpus.length > 0 && sample.gpus.every((gpu) => finite(gpu.energy_j)));
  const first = withEnergy[0];
  const last = withEnergy[withEnergy.length - 1];
  if (first === undefined || last === undefined || first === last) return null;
  const total = (sample: SampleEntry): number => sample.gpus.reduce((sum, gpu) => sum + (gpu.energy_j as number), 0);
  return total(last) - total(first);
}
