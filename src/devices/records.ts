/**
 * The devices' data in the run store's shapes (docs/run-store.md): the `device` block of
 * run.json and the `sample` line of timeline.ndjson.
 *
 * @example
 * ```ts
 * timeline.write(JSON.stringify(toSampleLine(reading)) + "\n");
 * ```
 * @module
 */
import type { DeviceInventory, Reading } from "./types.ts";

/**
 * run.json's `device` block.
 *
 * @example
 * ```ts
 * const device: DeviceRecord = toDeviceRecord(devices.inventory());
 * ```
 */
export interface DeviceRecord {
  backend: DeviceInventory["backend"];
  driver: string | null;
  gpus: { index: number; name: string; uuid: string | null; total_bytes: number }[];
  host: { cpus: number; mem_total_bytes: number };
}

/**
 * The inventory as run.json's `device` block.
 *
 * @example
 * ```ts
 * toDeviceRecord(devices.inventory()); // { backend: "nvml", driver: "550.54.15", gpus: [...], host: { cpus: 16, mem_total_bytes: ... } }
 * ```
 */
export function toDeviceRecord(inventory: DeviceInventory): DeviceRecord {
  return {
    backend: inventory.backend,
    driver: inventory.driver,
    gpus: inventory.gpus.map((g) => ({ index: g.index, name: g.name, uuid: g.uuid, total_bytes: g.totalBytes })),
    host: { cpus: inventory.host.cpus, mem_total_bytes: inventory.host.memTotalBytes },
  };
}

/**
 * One `sample` line of timeline.ndjson.
 *
 * @example
 * ```ts
 * const line: SampleLine = toSampleLine(reading);
 * ```
 */
export interface SampleLine {
  t: number;
  kind: "sample";
  tree: { pids: number; rss_bytes: number; cpu_percent: number | null; gpu_bytes: number | null } | null;
  gpus: {
    index: number;
    used_bytes: number;
    total_bytes: number;
    util: number | null;
    mem_util: number | null;
    sm_activity: number | null;
    power_w: number | null;
    sm_clock_mhz: number | null;
    throttle: string[] | null;
  }[];
  host: { mem_available_bytes: number; cpu_percent: number | null };
}

/**
 * A reading as the run store's `sample` line (`tree.pids` is the count of processes).
 *
 * @example
 * ```ts
 * JSON.stringify(toSampleLine(reading)); // {"t":…,"kind":"sample","tree":{"pids":3,…},"gpus":[…],"host":{…}}
 * ```
 */
export function toSampleLine(reading: Reading): SampleLine {
  const tree = reading.tree;
  return {
    t: reading.t,
    kind: "sample",
    tree: tree === null ? null : { pids: tree.pids.length, rss_bytes: tree.rssBytes, cpu_percent: tree.cpuPercent, gpu_bytes: tree.gpuBytes },
    gpus: reading.gpus.map((g) => ({
      index: g.index,
      used_bytes: g.usedBytes,
      total_bytes: g.totalBytes,
      util: g.util,
      mem_util: g.memUtil,
      sm_activity: g.smActivity,
      power_w: g.powerW,
      sm_clock_mhz: g.smClockMHz,
      throttle: g.throttle,
    })),
    host: { mem_available_bytes: reading.host.memAvailableBytes, cpu_percent: reading.host.cpuPercent },
  };
}
