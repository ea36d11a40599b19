/**
 * What `brim detect` reports: the inventory and one reading of the devices, in the report's
 * snake_case fields (its JSON is what `brim detect --json` prints). Pure.
 *
 * @example
 * ```ts
 * detectReport(devices.inventory(), await devices.read(null)).gpus[0]?.total_bytes;
 * ```
 * @module
 */
import type { Backend, DeviceInventory, GpuFeature, Reading } from "./types.ts";

/**
 * What `brim detect` found: the accelerators and the host, with one reading of each.
 *
 * @example
 * ```ts
 * const report: DetectReport = await detectCommand({});
 * report.backend; // "nvml" | "nvidia-smi" | "cpu"
 * ```
 */
export interface DetectReport {
  backend: Backend;
  note: string | null;
  driver: string | null;
  cuda: string | null;
  gpus: {
    index: number;
    name: string;
    uuid: string | null;
    compute_capability: string | null;
    total_bytes: number;
    used_bytes: number;
    util: number | null;
    mem_util: number | null;
    sm_activity: number | null;
    sm_occupancy: number | null;
    tensor_activity: number | null;
    dram_bandwidth: number | null;
    power_w: number | null;
    power_limit_w: number | null;
    energy_j: number | null;
    sm_clock_mhz: number | null;
    mem_clock_mhz: number | null;
    throttle: string[] | null;
    pcie_tx_kbs: number | null;
    pcie_rx_kbs: number | null;
    processes: { pid: number; used_bytes: number | null }[];
    lost: boolean;
    available: GpuFeature[];
  }[];
  host: { cpus: number; usable_cpus: number; cpu_model: string | null; mem_total_bytes: number; mem_available_bytes: number; cpu_percent: number | null };
}

/**
 * Builds the report from an inventory and a reading (pure).
 *
 * @example
 * ```ts
 * detectReport(devices.inventory(), await devices.read(null));
 * ```
 */
export function detectReport(inventory: DeviceInventory, reading: Reading): DetectReport {
  return {
    backend: inventory.backend,
    note: inventory.note,
    driver: inventory.driver,
    cuda: inventory.cuda,
    gpus: inventory.gpus.map((gpu) => {
      const r = reading.gpus.find((g) => g.index === gpu.index);
      return {
        index: gpu.index,
        name: gpu.name,
        uuid: gpu.uuid,
        compute_capability: gpu.computeCapability,
        total_bytes: r?.totalBytes || gpu.totalBytes,
        used_bytes: r?.usedBytes ?? 0,
        util: r?.util ?? null,
        mem_util: r?.memUtil ?? null,
        sm_activity: r?.smActivity ?? null,
        sm_occupancy: r?.smOccupancy ?? null,
        tensor_activity: r?.tensorActivity ?? null,
        dram_bandwidth: r?.dramBandwidth ?? null,
        power_w: r?.powerW ?? null,
        power_limit_w: r?.powerLimitW ?? null,
        energy_j: r?.energyJ ?? null,
        sm_clock_mhz: r?.smClockMHz ?? null,
        mem_clock_mhz: r?.memClockMHz ?? null,
        throttle: r?.throttle ?? null,
        pcie_tx_kbs: r?.pcieTxKBs ?? null,
        pcie_rx_kbs: r?.pcieRxKBs ?? null,
        processes: (r?.processes ?? []).map((p) => ({ pid: p.pid, used_bytes: p.usedBytes })),
        lost: r?.lost ?? false,
        available: gpu.available,
      };
    }),
    host: {
      cpus: inventory.host.cpus,
      usable_cpus: inventory.host.usableCpus,
      cpu_model: inventory.host.cpuModel,
      mem_total_bytes: inventory.host.memTotalBytes,
      mem_available_bytes: reading.host.memAvailableBytes,
      cpu_percent: reading.host.cpuPercent,
    },
  };
}
