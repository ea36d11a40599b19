/**
 * Binds {@link NvmlApi} to libnvidia-ml through koffi. Each symbol is bound on its own, so a
 * driver that lacks one call only loses that reading.
 *
 * @example
 * ```ts
 * const loaded = loadNvmlLibrary("libnvidia-ml.so.1");
 * if ("api" in loaded) loaded.api.nvmlInit_v2();
 * ```
 * @module
 */
import { createRequire } from "node:module";
import type * as Koffi from "koffi";
import type { NvmlApi, NvmlFunctionName } from "./nvml-api.ts";
import { NVML_RETURN } from "./nvml-structs.ts";

/** The library name the driver installs (the unversioned .so is only in the dev package). @example loadNvmlLibrary(DEFAULT_NVML_LIBRARY); */
export const DEFAULT_NVML_LIBRARY = "libnvidia-ml.so.1";

// Every pointer is `void *` so a Buffer (or null) goes in unchanged and the driver's bytes come back in it.
const DECLARATIONS: Record<Exclude<NvmlFunctionName, "nvmlDeviceGetPcieThroughput">, string> = {
  nvmlInit_v2: "int nvmlInit_v2(void)",
  nvmlShutdown: "int nvmlShutdown(void)",
  nvmlErrorString: "const char *nvmlErrorString(int result)",
  nvmlSystemGetDriverVersion: "int nvmlSystemGetDriverVersion(void *version, uint32_t length)",
  nvmlSystemGetCudaDriverVersion_v2: "int nvmlSystemGetCudaDriverVersion_v2(void *version)",
  nvmlDeviceGetCount_v2: "int nvmlDeviceGetCount_v2(void *count)",
  nvmlDeviceGetHandleByIndex_v2: "int nvmlDeviceGetHandleByIndex_v2(uint32_t index, void *device)",
  nvmlDeviceGetName: "int nvmlDeviceGetName(void *device, void *name, uint32_t length)",
  nvmlDeviceGetUUID: "int nvmlDeviceGetUUID(void *device, void *uuid, uint32_t length)",
  nvmlDeviceGetCudaComputeCapability: "int nvmlDeviceGetCudaComputeCapability(void *device, void *major, void *minor)",
  nvmlDeviceGetMemoryInfo: "int nvmlDeviceGetMemoryInfo(void *device, void *memory)",
  nvmlDeviceGetMemoryInfo_v2: "int nvmlDeviceGetMemoryInfo_v2(void *device, void *memory)",
  nvmlDeviceGetUtilizationRates: "int nvmlDeviceGetUtilizationRates(void *device, void *utilization)",
  nvmlDeviceGetSamples: "int nvmlDeviceGetSamples(void *device, int type, uint64_t lastSeenTimeStamp, void *valueType, void *count, void *samples)",
  nvmlDeviceGetComputeRunningProcesses_v3: "int nvmlDeviceGetComputeRunningProcesses_v3(void *device, void *count, void *infos)",
  nvmlDeviceGetComputeRunningProcesses_v2: "int nvmlDeviceGetComputeRunningProcesses_v2(void *device, void *count, void *infos)",
  nvmlDeviceGetComputeRunningProcesses: "int nvmlDeviceGetComputeRunningProcesses(void *device, void *count, void *infos)",
  nvmlDeviceGetProcessUtilization: "int nvmlDeviceGetProcessUtilization(void *device, void *samples, void *count, uint64_t lastSeenTimeStamp)",
  nvmlDeviceGetPowerUsage: "int nvmlDeviceGetPowerUsage(void *device, void *milliwatts)",
  nvmlDeviceGetEnforcedPowerLimit: "int nvmlDeviceGetEnforcedPowerLimit(void *device, void *milliwatts)",
  nvmlDeviceGetTotalEnergyConsumption: "int nvmlDeviceGetTotalEnergyConsumption(void *device, void *millijoules)",
  nvmlDeviceGetClockInfo: "int nvmlDeviceGetClockInfo(void *device, int type, void *megahertz)",
  nvmlDeviceGetCurrentClocksEventReasons: "int nvmlDeviceGetCurrentClocksEventReasons(void *device, void *reasons)",
  nvmlDeviceGetCurrentClocksThrottleReasons: "int nvmlDeviceGetCurrentClocksThrottleReasons(void *device, void *reasons)",
  nvmlGpmQueryDeviceSupport: "int nvmlGpmQueryDeviceSupport(void *device, void *support)",
  nvmlGpmSampleAlloc: "int nvmlGpmSampleAlloc(void *sample)",
  nvmlGpmSampleFree: "int nvmlGpmSampleFree(void *sample)",
  nvmlGpmSampleGet: "int nvmlGpmSampleGet(void *device, void *sample)",
  nvmlGpmMetricsGet: "int nvmlGpmMetricsGet(void *metrics)",
  nvmlEventSetCreate: "int nvmlEventSetCreate(void *set)",
  nvmlDeviceRegisterEvents: "int nvmlDeviceRegisterEvents(void *device, uint64_t eventTypes, void *set)",
  nvmlEventSetWait_v2: "int nvmlEventSetWait_v2(void *set, void *data, uint32_t timeoutms)",
  nvmlEventSetFree: "int nvmlEventSetFree(void *set)",
};

function loadKoffi(): typeof Koffi {
  // Loaded on first use, so commands that never touch a GPU do not pay for the native module.
  return createRequire(import.meta.url)("koffi") as typeof Koffi;
}

/**
 * Loads the NVML library and binds every call brim uses; never throws. `error` says why the
 * library could not be used (not found, or not NVML).
 *
 * @example
 * ```ts
 * const loaded = loadNvmlLibrary();
 * if ("error" in loaded) console.log(loaded.error); // "libnvidia-ml.so.1 not loadable"
 * ```
 */
export function loadNvmlLibrary(path: string = DEFAULT_NVML_LIBRARY): { api: NvmlApi } | { error: string } {
  let koffi: typeof Koffi;
  let library: Koffi.LibraryHandle;
  try {
    koffi = loadKoffi();
  } catch (error) {
    return { error: `the koffi FFI module did not load (${(error as Error).message.split("\n")[0] ?? "unknown error"}), so ${path} was not tried` };
  }
  try {
    library = koffi.load(path);
  } catch {
    return { error: `${path} not loadable` };
  }
  const bound: Partial<Record<NvmlFunctionName, unknown>> = {};
  for (const [name, declaration] of Object.entries(DECLARATIONS) as [NvmlFunctionName, string][]) {
    try {
      bound[name] = library.func(declaration);
    } catch {
      // A driver that predates the call: the reading it feeds becomes "not available".
    }
  }
  if (bound.nvmlInit_v2 === undefined) {
    try {
      bound.nvmlInit_v2 = library.func("int nvmlInit(void)");
    } catch {
      // Checked just below.
    }
  }
  try {
    const pcie = library.func("int nvmlDeviceGetPcieThroughput(void *device, int counter, void *value)");
    bound.nvmlDeviceGetPcieThroughput = (device: bigint, counter: number, value: Buffer) =>
      new Promise<number>((resolve) => {
        pcie.async(device, counter, value, (error: unknown, result: number) => resolve(error === null || error === undefined ? result : NVML_RETURN.UNKNOWN));
      });
  } catch {
    // Optional.
  }
  if (
    bound.nvmlInit_v2 === undefined ||
    bound.nvmlShutdown === undefined ||
    bound.nvmlDeviceGetCount_v2 === undefined ||
    bound.nvmlDeviceGetHandleByIndex_v2 === undefined
  ) {
    return { error: `${path} lacks nvmlInit_v2/nvmlDeviceGetCount_v2 (not an NVML library, or one too old)` };
  }
  return { api: { library: path, ...bound } as unknown as NvmlApi };
}
