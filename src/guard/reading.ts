/**
 * What the guard makes of one sampler reading, without I/O: the memory the cap compares, the peaks
 * of the process tree, the live reading, and the timeline event of a cap action.
 *
 * @module
 */
import type { Reading } from "../devices/index.ts";
import type { TimelineEntry } from "../record/types.ts";
import { mean } from "../stats.ts";
import type { CapAction } from "./cap.ts";
import type { LiveReading } from "./live.ts";

/** The largest memory the job's process tree held, by measure (null: never read). */
export interface TreePeaks {
  gpu: number | null;
  rss: number | null;
  pss: number | null;
}

/**
 * Whether a reading was taken while the job is being reaped: its pid shows with no memory, which is
 * not a measurement.
 *
 * @example
 * ```ts
 * isReapingReading(reading); // false for a running job
 * ```
 */
export function isReapingReading(reading: Reading): boolean {
  return reading.tree !== null && reading.tree.rssBytes === 0;
}

/**
 * The peaks after one more reading (RSS and PSS only while the tree has processes).
 *
 * @example
 * ```ts
 * peaksAfter({ gpu: null, rss: null, pss: null }, reading).gpu;
 * ```
 */
export function peaksAfter(peaks: TreePeaks, reading: Reading): TreePeaks {
  const tree = reading.tree;
  const alive = (tree?.pids.length ?? 0) > 0;
  const gpuBytes = tree?.gpuBytes ?? null;
  const rssBytes = tree?.rssBytes ?? null;
  const pssBytes = tree?.pssBytes ?? null;
  return {
    gpu: gpuBytes !== null ? Math.max(peaks.gpu ?? 0, gpuBytes) : peaks.gpu,
    rss: rssBytes !== null && alive ? Math.max(peaks.rss ?? 0, rssBytes) : peaks.rss,
    pss: pssBytes !== null && alive ? Math.max(peaks.pss ?? 0, pssBytes) : peaks.pss,
  };
}

/**
 * The memory the cap is compared with: the tree's GPU memory, or in CPU mode RAM as the OS counts
 * it (PSS: shared pages of forked workers counted once; RSS where PSS is unreadable).
 *
 * @example
 * ```ts
 * cappedBytes(reading, "ram"); // the tree's PSS
 * ```
 */
export function cappedBytes(reading: Reading, capScope: "gpu" | "ram"): number | null {
  const tree = reading.tree;
  return capScope === "gpu" ? (tree?.gpuBytes ?? null) : (tree?.pssBytes ?? tree?.rssBytes ?? null);
}

const meanKnown = (values: (number | null)[]): number | null => mean(values.filter((value): value is number => value !== null));

/**
 * A sampler reading as the live tracker reads it: GPU figures averaged over the GPUs, power summed.
 *
 * @example
 * ```ts
 * liveReadingOf(reading, cappedBytes(reading, "gpu")).gpuUtil;
 * ```
 */
export function liveReadingOf(reading: Reading, usedBytes: number | null): LiveReading {
  const gpus = reading.gpus;
  const powers = gpus.map((gpu) => gpu.powerW).filter((value): value is number => value !== null);
  return {
    t: reading.t,
    usedBytes,
    treeGpuBytes: reading.tree?.gpuBytes ?? null,
    treeRssBytes: reading.tree?.rssBytes ?? null,
    gpuUtil: meanKnown(gpus.map((gpu) => gpu.util)),
    smActivity: meanKnown(gpus.map((gpu) => gpu.smActivity)),
    powerW: powers.length > 0 ? powers.reduce((a, b) => a + b, 0) : null,
    cpuPercent: reading.tree?.cpuPercent ?? null,
    processes: reading.tree?.pids.length ?? null,
    perGpu: gpus.map((gpu) => ({ index: gpu.index, util: gpu.util, smActivity: gpu.smActivity, powerW: gpu.powerW, usedBytes: gpu.usedBytes })),
  };
}

/**
 * The timeline event of a cap action that was taken (a shrink the job was asked for, or a stop).
 *
 * @example
 * ```ts
 * capEventOf({ kind: "stop", usedBytes: 9, detail: "over the cap" }, 12.5, 8).event; // "cap_stop"
 * ```
 */
export function capEventOf(action: Exclude<CapAction, { kind: "none" }>, t: number, capBytes: number | null): TimelineEntry {
  const details = { used_bytes: action.usedBytes, cap_bytes: capBytes };
  if (action.kind === "shrink") {
    const message = "near the cap: brim asked the job to shrink its micro-batch";
    return { t, kind: "event", event: "shrink_requested", pid: null, step: null, message, details };
  }
  return { t, kind: "event", event: "cap_stop", pid: null, step: null, message: action.detail, details };
}
