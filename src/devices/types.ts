/**
 * What the devices stage hands to the rest of brim: the inventory of accelerators and host, and
 * one reading of how busy they are. Every number brim could not measure is `null`, never 0.
 *
 * @example
 * ```ts
 * import type { Devices, Reading } from "./types.ts";
 * const reading: Reading = await devices.read(process.pid);
 * ```
 * @module
 */

/** Where GPU numbers come from: the NVML library, the `nvidia-smi` binary, or no GPU at all. @example if (inventory.backend === "cpu") capRam(); */
export type Backend = "nvml" | "nvidia-smi" | "cpu";

/**
 * One GPU as found when the devices were opened.
 *
 * @example
 * ```ts
 * const gpu: GpuInfo = { index: 0, name: "NVIDIA H100 80GB HBM3", uuid: "GPU-…", totalBytes: 85520809984, computeCapability: "9.0", available: ["util", "gpm"] };
 * ```
 */
export interface GpuInfo {
  index: number;
  name: string;
  uuid: string | null;
  totalBytes: number;
  /** CUDA compute capability, e.g. "8.6"; null when the backend cannot tell. */
  computeCapability: string | null;
  /** The optional readings this GPU gave when probed (see {@link GPU_FEATURES}). */
  available: GpuFeature[];
}

/**
 * The optional readings a GPU may or may not give, in the order `brim detect` lists them.
 *
 * @example
 * ```ts
 * if (gpu.available.includes("gpm")) console.log("SM activity is measured");
 * ```
 */
export const GPU_FEATURES = [
  "util",
  "util_samples",
  "processes",
  "process_util",
  "power",
  "power_limit",
  "energy",
  "clocks",
  "throttle",
  "pcie",
  "gpm",
  "xid_events",
] as const;

/** One of {@link GPU_FEATURES}. @example const feature: GpuFeature = "gpm"; */
export type GpuFeature = (typeof GPU_FEATURES)[number];

/**
 * The accelerators and host found by {@link Devices.inventory}.
 *
 * @example
 * ```ts
 * const inv = devices.inventory();
 * if (inv.note !== null) console.error(inv.note);
 * ```
 */
export interface DeviceInventory {
  backend: Backend;
  /** The one line to print once (CPU mode, fallback in use, ...); null when all is normal. */
  note: string | null;
  driver: string | null;
  /** The CUDA version the driver supports, e.g. "12.4"; null when unknown. */
  cuda: string | null;
  gpus: GpuInfo[];
  host: HostInfo;
}

/**
 * The host machine.
 *
 * @example
 * ```ts
 * const host: HostInfo = { cpus: 16, usableCpus: 16, memTotalBytes: 137438953472, cpuModel: "AMD EPYC 7R13" };
 * ```
 */
export interface HostInfo {
  /** Logical CPUs of the machine. */
  cpus: number;
  /** Logical CPUs this process may run on (CPU affinity), at most `cpus`. */
  usableCpus: number;
  memTotalBytes: number;
  cpuModel: string | null;
}

/**
 * One GPU process as the driver lists it. `pid` is the host PID the driver reports.
 *
 * @example
 * ```ts
 * const p: GpuProcess = { pid: 4242, usedBytes: 2 ** 30, smUtil: 87, memUtil: 40 };
 * ```
 */
export interface GpuProcess {
  pid: number;
  /** All memory the process holds on this GPU (allocator cache, context, workspaces); null when the driver hides it. */
  usedBytes: number | null;
  /** Share of time (0–100) one of this process's kernels ran, from the driver's latest per-process sample; null when none. */
  smUtil: number | null;
  /** Share of time (0–100) this process read or wrote device memory; null when none. */
  memUtil: number | null;
}

/**
 * A point of the driver's own utilization sample buffer (`nvmlDeviceGetSamples`).
 *
 * @example
 * ```ts
 * const s: UtilSample = { t: 1763806500.25, value: 97 };
 * ```
 */
export interface UtilSample {
  /** Unix time in seconds when the driver took the sample. */
  t: number;
  value: number;
}

/**
 * One GPU at one moment. See docs/devices.md for the exact meaning of each number.
 *
 * @example
 * ```ts
 * const busy = reading.gpus.filter((g) => (g.util ?? 0) > 50);
 * ```
 */
export interface GpuReading {
  index: number;
  usedBytes: number;
  totalBytes: number;
  /** Memory the driver keeps for itself (NVML memory v2 only); null elsewhere. */
  reservedBytes: number | null;
  /** Share of time (0–100) one or more kernels ran; NOT SM occupancy. */
  util: number | null;
  /** Share of time (0–100) device memory was read or written; NOT capacity used. */
  memUtil: number | null;
  /** Samples from the driver's utilization buffer that are new since the previous reading. */
  utilSamples: UtilSample[] | null;
  /** GPM (Hopper and newer): share of SMs busy, 0–100. */
  smActivity: number | null;
  /** GPM: resident warps over the theoretical maximum, 0–100. */
  smOccupancy: number | null;
  /** GPM: share of time any tensor-core pipe was busy, 0–100. */
  tensorActivity: number | null;
  /** GPM: DRAM bandwidth used over its peak, 0–100. */
  dramBandwidth: number | null;
  powerW: number | null;
  powerLimitW: number | null;
  /** The GPU's energy counter since the driver was loaded, in joules; take differences. */
  energyJ: number | null;
  smClockMHz: number | null;
  memClockMHz: number | null;
  /** Active clock-event (throttle) reasons, e.g. ["sw_power_cap","hw_thermal"]; [] when none. */
  throttle: string[] | null;
  pcieTxKBs: number | null;
  pcieRxKBs: number | null;
  processes: GpuProcess[];
  /** Xid errors the driver reported since the previous reading. */
  xids: number[];
  /** The GPU is gone or needs a reset (GPU_IS_LOST, RESET_REQUIRED, a fatal Xid); sticky. */
  lost: boolean;
  /** Unix time in seconds when these GPU values were taken (older than the reading with nvidia-smi). */
  sampledAt: number;
}

/**
 * A process tree: the root process and all its descendants (loader workers, ranks, ...).
 *
 * @example
 * ```ts
 * const tree: TreeReading = { rootPid: 1234, pids: [1234, 1240], rssBytes: 2 ** 31, cpuPercent: 180.5, gpuBytes: 2 ** 33 };
 * ```
 */
export interface TreeReading {
  rootPid: number;
  /** The root first, then descendants; [] once the root has exited. */
  pids: number[];
  /** Σ resident set size over the tree (shared pages counted in each process). */
  rssBytes: number;
  /**
   * Σ proportional set size over the tree (a shared page split among the processes that map it):
   * RAM as the OS counts it for a tree that forks. null (or absent) where smaps_rollup is not readable.
   */
  pssBytes?: number | null;
  /** CPU time of the tree over wall time since the previous reading, in % of one core (can exceed 100); null on the first reading. */
  cpuPercent: number | null;
  /** Σ GPU memory of the driver's processes that belong to the tree; null in CPU mode or when the driver hides it. */
  gpuBytes: number | null;
}

/**
 * One snapshot of everything.
 *
 * @example
 * ```ts
 * const r: Reading = await devices.read(child.pid ?? null);
 * console.log(r.t, r.tree?.rssBytes, r.gpus[0]?.util);
 * ```
 */
export interface Reading {
  /** Unix time in seconds (float) when the reading began. */
  t: number;
  gpus: GpuReading[];
  tree: TreeReading | null;
  host: HostReading;
}

/**
 * The host at one moment.
 *
 * @example
 * ```ts
 * const h: HostReading = { memAvailableBytes: 2 ** 34, cpuPercent: 12.5 };
 * ```
 */
export interface HostReading {
  /** MemAvailable from /proc/meminfo: what new work can take without swapping. */
  memAvailableBytes: number;
  /** Busy share of all CPUs together (0–100) since the previous reading; null on the first. */
  cpuPercent: number | null;
}

/**
 * The devices of this machine, opened once.
 *
 * @example
 * ```ts
 * const devices = openDevices();
 * try { console.log(await devices.read(null)); } finally { devices.close(); }
 * ```
 */
export interface Devices {
  inventory(): DeviceInventory;
  /**
   * One snapshot; `tree` covers rootPid and all its descendants (and those of `extraRoots`, the
   * job's processes outside its tree), null when rootPid is null.
   */
  read(rootPid: number | null, extraRoots?: readonly number[]): Promise<Reading>;
  close(): void;
}

/**
 * A running sampler (see startSampler).
 *
 * @example
 * ```ts
 * const sampler = startSampler(devices, { rootPid: child.pid ?? null, onReading: (r) => timeline.push(r) });
 * await sampler.stop();
 * ```
 */
export interface Sampler {
  /** Stops the timer and waits for a read in flight; no reading is delivered after it resolves. */
  stop(): Promise<void>;
  latest(): Reading | null;
  /** Readings delivered, ticks skipped because a read was still in flight, and reads that failed. */
  counts(): { readings: number; skipped: number; errors: number };
}
