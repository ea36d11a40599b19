import type { Command } from "commander";
import { openDevices, type OpenDevicesOptions } from "../devices/index.ts";
import type { Backend, DeviceInventory, GpuFeature, Reading } from "../devices/index.ts";
import type { Output } from "./output.ts";
import { renderDetectText } from "./render-detect.ts";

/** Options of `brim detect` as the command line gives them. @example await detectCommand({ json: true, nvidiaSmi: false }); */
export interface DetectCommandOptions {
  json?: boolean;
  nvmlLibrary?: string;
  /** false with --no-nvidia-smi. */
  nvidiaSmi?: boolean;
  /** Milliseconds between the two readings (CPU use and GPM need two); default 200. */
  intervalMs?: number;
}

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

/**
 * `brim detect`: opens the devices, reads them twice `intervalMs` apart (CPU use and GPM
 * activity are differences), and returns what it found. Printing is {@link printDetect}'s.
 *
 * @example
 * ```ts
 * const report = await detectCommand({ nvidiaSmi: false });
 * ```
 */
export async function detectCommand(
  options: DetectCommandOptions = {},
  open: (o: OpenDevicesOptions) => ReturnType<typeof openDevices> = openDevices,
): Promise<DetectReport> {
  const devices = open({ nvmlLibrary: options.nvmlLibrary, smiPath: options.nvidiaSmi === false ? null : undefined });
  try {
    await devices.read(null);
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 200));
    const reading = await devices.read(null);
    return detectReport(devices.inventory(), reading);
  } finally {
    devices.close();
  }
}

/**
 * Prints a detect report as text or JSON.
 *
 * @example
 * ```ts
 * printDetect(report, { json: true }, output);
 * ```
 */
export function printDetect(report: DetectReport, options: Pick<DetectCommandOptions, "json">, out: Output): void {
  out.stdout(options.json === true ? JSON.stringify(report, null, 2) + "\n" : renderDetectText(report));
}

const EXAMPLES = `
Examples:
  $ brim detect
  $ brim detect --json | jq '.gpus[0].total_bytes'
  $ brim detect --nvml-library /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1

brim reads GPUs through NVML (libnvidia-ml.so.1), falls back on nvidia-smi when only the binary
is there, and otherwise runs in CPU mode, where caps and readings apply to RAM. "readings" lists
what this GPU and driver answer; utilization is the share of time a kernel ran, not SM activity
(see docs/devices.md).
`;

/**
 * Declares `brim detect` on a commander program.
 *
 * @example
 * ```ts
 * registerDetect(program, output);
 * ```
 */
export function registerDetect(program: Command, out: Output): void {
  program
    .command("detect")
    .summary("list the GPUs and the host brim can see, and what it can read from them")
    .description("List the accelerators and the host: GPUs with memory, utilization, power and clocks, and which readings the driver gives.")
    .option("--json", "print the report as JSON")
    .option("--nvml-library <path>", "NVML library to load instead of libnvidia-ml.so.1")
    .option("--no-nvidia-smi", "do not fall back on nvidia-smi when NVML cannot be loaded")
    .addHelpText("after", EXAMPLES)
    .action(async (options: DetectCommandOptions) => {
      printDetect(await detectCommand(options), options, out);
    });
}
