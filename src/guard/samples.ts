/**
 * Sampler readings as timeline entries.
 *
 * @module
 */
import type { Reading } from "../devices/index.ts";
import type { TimelineEntry } from "../record/types.ts";

/**
 * A sampler reading as a timeline `sample` entry.
 *
 * @example
 * ```ts
 * sampleEntryOf(reading).tree?.rss_bytes;
 * ```
 */
export function sampleEntryOf(reading: Reading): TimelineEntry {
  return {
    t: reading.t,
    kind: "sample",
    tree: reading.tree
      ? {
          pids: reading.tree.pids.length,
          rss_bytes: reading.tree.rssBytes,
          pss_bytes: reading.tree.pssBytes ?? null,
          cpu_percent: reading.tree.cpuPercent,
          gpu_bytes: reading.tree.gpuBytes,
          gpu_pids: gpuPidsOfTree(reading),
        }
      : null,
    gpus: reading.gpus.map((gpu) => ({
      index: gpu.index,
      used_bytes: gpu.usedBytes,
      total_bytes: gpu.totalBytes,
      util: gpu.util,
      mem_util: gpu.memUtil,
      sm_activity: gpu.smActivity,
      tensor_activity: gpu.tensorActivity,
      power_w: gpu.powerW,
      energy_j: gpu.energyJ,
      sm_clock_mhz: gpu.smClockMHz,
      throttle: gpu.throttle,
      pcie_tx_kbs: gpu.pcieTxKBs,
      pcie_rx_kbs: gpu.pcieRxKBs,
      processes: gpu.processes.length,
    })),
    host: { mem_available_bytes: reading.host.memAvailableBytes, cpu_percent: reading.host.cpuPercent },
  };
}

/** How many of the tree's processes hold GPU memory (each one a CUDA context). */
function gpuPidsOfTree(reading: Reading): number | null {
  if (reading.tree === null || reading.gpus.length === 0) return null;
  const tree = new Set(reading.tree.pids);
  return new Set(reading.gpus.flatMap((gpu) => gpu.processes.map((process) => process.pid)).filter((pid) => tree.has(pid))).size;
}
