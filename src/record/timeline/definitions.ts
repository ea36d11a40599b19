/**
 * The definitions readers apply to a folded timeline: the main process's steps, its steady steps,
 * the readings of the steady window, and run.json's summary. The rate rule a run and a tune's trial
 * share, and what a trial leaves out beyond it on purpose, are written once in src/tune/window.ts.
 *
 * @module
 */
import type { LivePeaks, RunSummary } from "../types.ts";
import type { SampleEntry, StepEntry, Timeline } from "./types.ts";
import { isWarmupStep } from "./entries.ts";

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
    steady_samples: m.steady_samples,
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
    energy_j_per_sample: m.energy_j !== null && m.steady_samples > 0 ? m.energy_j / m.steady_samples : null,
    oom_recoveries: m.oom_recoveries,
    micro_batch: m.micro_batch,
    accumulation: m.accumulation,
    env_steps_per_s: m.env_steps_per_s,
  };
}

function maxKnown(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.max(a, b);
}
