import type { Command } from "commander";
import { detectReport, openDevices, type DetectReport, type OpenDevicesOptions } from "../devices/index.ts";
import type { Output } from "./output.ts";
import { renderDetectText } from "./render-detect.ts";

export { detectReport, type DetectReport } from "../devices/index.ts";

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
