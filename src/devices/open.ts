/**
 * One entry to the machine's devices: NVML when the library loads, nvidia-smi when only the
 * binary is there, CPU mode otherwise; procfs for process trees and the host in every case.
 *
 * @example
 * ```ts
 * const devices = openDevices();
 * const inventory = devices.inventory();
 * if (inventory.note !== null) console.error(inventory.note);
 * ```
 * @module
 */
import { availableParallelism, cpus as osCpus, freemem, totalmem } from "node:os";
import type { NvmlApi } from "./nvml-api.ts";
import { openNvmlGpus, type NvmlGpusOptions } from "./nvml-gpus.ts";
import { DEFAULT_NVML_LIBRARY, loadNvmlLibrary } from "./nvml-koffi.ts";
import { findOnPath, openSmiGpus, type SmiOptions } from "./nvidia-smi.ts";
import { ProcFs, createHostReader, createTreeReader } from "./procfs.ts";
import type { Backend, DeviceInventory, Devices, GpuInfo, GpuProcess, GpuReading, HostInfo, Reading, TreeReading } from "./types.ts";

/**
 * Where {@link openDevices} looks.
 *
 * @example
 * ```ts
 * openDevices({ nvmlLibrary: "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", smiPath: null });
 * ```
 */
export interface OpenDevicesOptions {
  /** The NVML library to load (default libnvidia-ml.so.1, found by the dynamic loader). */
  nvmlLibrary?: string;
  /** A ready NvmlApi (a fake in tests) instead of loading the library; null skips NVML. */
  nvml?: NvmlApi | null;
  /** nvidia-smi to fall back on; undefined searches PATH, null turns the fallback off. */
  smiPath?: string | null;
  /** The procfs root (default /proc). */
  procRoot?: string;
  /** The clock, in milliseconds since the epoch. */
  nowMs?: () => number;
  nvmlOptions?: NvmlGpusOptions;
  smiOptions?: SmiOptions;
}

const CPU_MODE = "CPU mode, caps and readings apply to RAM";

interface GpuSource {
  backend: Backend;
  note: string | null;
  driver: string | null;
  cuda: string | null;
  gpus(): GpuInfo[];
  read(): Promise<GpuReading[]>;
  close(): void;
}

function openGpuSource(options: OpenDevicesOptions): GpuSource {
  const library = options.nvmlLibrary ?? DEFAULT_NVML_LIBRARY;
  let why: string;
  const loaded = options.nvml === undefined ? loadNvmlLibrary(library) : options.nvml === null ? { error: "NVML skipped" } : { api: options.nvml };
  if ("api" in loaded) {
    const opened = openNvmlGpus(loaded.api, { nowMs: options.nowMs, ...options.nvmlOptions });
    if ("gpus" in opened && opened.gpus.gpus.length > 0) {
      const nvml = opened.gpus;
      return { backend: "nvml", note: null, driver: nvml.driver, cuda: nvml.cuda, gpus: () => nvml.gpus, read: () => nvml.read(), close: () => nvml.close() };
    }
    if ("gpus" in opened) opened.gpus.close();
    why = "error" in opened ? opened.error : "NVML sees no GPU";
  } else {
    why = loaded.error;
  }

  const smiPath = options.smiPath === undefined ? findOnPath("nvidia-smi") : options.smiPath;
  if (smiPath !== null) {
    const smi = openSmiGpus(smiPath, { nowMs: options.nowMs, ...options.smiOptions });
    if ("gpus" in smi) {
      const found = smi.gpus;
      return {
        backend: "nvidia-smi",
        note: `NVML not usable (${why}); reading GPUs through ${smiPath}: about one reading a second, no SM activity, energy, PCIe or per-process utilization`,
        driver: found.driver,
        cuda: null,
        gpus: () => found.gpus,
        read: () => found.read(),
        close: () => found.close(),
      };
    }
    why = `${why}; ${smi.error}`;
  }
  return {
    backend: "cpu",
    note: `no NVIDIA GPU found (${why}): ${CPU_MODE}`,
    driver: null,
    cuda: null,
    gpus: () => [],
    read: () => Promise.resolve([]),
    close: () => {},
  };
}

/**
 * The GPU memory a process tree holds: Σ usedBytes of the GPU processes whose pid is in the tree.
 * The driver reports host pids; a pid that this procfs does not show at all comes from another
 * PID namespace, and is matched against the tree's pids in inner namespaces (NSpid). Null when a
 * matched process's memory is hidden by the driver.
 *
 * @example
 * ```ts
 * treeGpuBytes([10, 11], [{ pid: 11, usedBytes: 1024, smUtil: null, memUtil: null }], () => true, () => null); // 1024
 * ```
 */
export function treeGpuBytes(
  treePids: readonly number[],
  processes: readonly GpuProcess[],
  pidVisible: (pid: number) => boolean,
  nsPids: (pid: number) => number[] | null,
): number | null {
  const tree = new Set(treePids);
  let innerPids: Set<number> | null = null;
  let total = 0;
  for (const p of processes) {
    let inTree = tree.has(p.pid);
    if (!inTree && !pidVisible(p.pid)) {
      innerPids ??= new Set(treePids.flatMap((pid) => (nsPids(pid) ?? []).slice(1)));
      inTree = innerPids.has(p.pid);
    }
    if (!inTree) continue;
    if (p.usedBytes === null) return null;
    total += p.usedBytes;
  }
  return total;
}

/**
 * Opens the machine's devices; never throws for a missing library or driver (that is CPU mode,
 * with `inventory().note` saying why).
 *
 * @example
 * ```ts
 * const devices = openDevices();
 * const reading = await devices.read(process.pid);
 * devices.close();
 * ```
 */
export function openDevices(options: OpenDevicesOptions = {}): Devices {
  const nowMs = options.nowMs ?? Date.now;
  const proc = new ProcFs(options.procRoot);
  const source = openGpuSource(options);
  const trees = createTreeReader(proc, nowMs);
  const host = createHostReader(proc, freemem);
  const cpuList = osCpus();
  const hostInfo: HostInfo = {
    cpus: Math.max(cpuList.length, 1),
    usableCpus: Math.min(availableParallelism(), Math.max(cpuList.length, 1)),
    memTotalBytes: proc.memInfo()?.memTotalBytes ?? totalmem(),
    cpuModel: cpuList[0]?.model.trim() || null,
  };
  host.read();
  let closed = false;

  return {
    inventory(): DeviceInventory {
      return { backend: source.backend, note: source.note, driver: source.driver, cuda: source.cuda, gpus: source.gpus(), host: hostInfo };
    },
    async read(rootPid: number | null, extraRoots: readonly number[] = []): Promise<Reading> {
      const t = nowMs() / 1000;
      const gpus = closed ? [] : await source.read();
      let tree: TreeReading | null = null;
      if (rootPid !== null) {
        const { pids, rssBytes, pssBytes, cpuPercent, visiblePids } = trees.read(rootPid, extraRoots);
        const processes = gpus.flatMap((g) => g.processes);
        const listed = source.gpus().some((g) => g.available.includes("processes"));
        const gpuBytes = !listed
          ? null
          : treeGpuBytes(
              pids,
              processes,
              (pid) => visiblePids.has(pid),
              (pid) => proc.nsPids(pid),
            );
        tree = { rootPid, pids, rssBytes, pssBytes, cpuPercent, gpuBytes };
      }
      return { t, gpus, tree, host: host.read() };
    },
    close(): void {
      if (closed) return;
      closed = true;
      source.close();
    },
  };
}
