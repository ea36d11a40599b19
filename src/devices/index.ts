/**
 * The devices stage: what hardware there is and how busy it is. NVML through koffi, procfs for
 * CPU, RAM and process trees, nvidia-smi as a fallback, one sampler over all of it.
 *
 * @example
 * ```ts
 * import { openDevices, startSampler } from "./devices/index.ts";
 * const devices = openDevices();
 * const sampler = startSampler(devices, { rootPid: child.pid ?? null, onReading: (r) => console.log(r.gpus[0]?.util) });
 * ```
 * @module
 */
export { openDevices, treeGpuBytes, type OpenDevicesOptions } from "./open.ts";
export { startSampler, type SamplerOptions } from "./sampler.ts";
export { detectReport, type DetectReport } from "./report.ts";
export { GPU_FEATURES } from "./types.ts";
export type {
  Backend,
  DeviceInventory,
  Devices,
  GpuFeature,
  GpuInfo,
  GpuProcess,
  GpuReading,
  HostInfo,
  HostReading,
  Reading,
  Sampler,
  TreeReading,
  UtilSample,
} from "./types.ts";
export type { NvmlApi, NvmlHandle } from "./nvml-api.ts";
