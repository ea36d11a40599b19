/**
 * The raw NVML calls brim makes, as an interface: the koffi binding implements it over
 * libnvidia-ml, tests implement it with a fake driver. Names and argument order are nvml.h's;
 * every pointer argument is a Buffer the callee writes into (decode it with nvml-structs.ts),
 * opaque handles (`nvmlDevice_t`, `nvmlGpmSample_t`, `nvmlEventSet_t`) are BigInt, and each call
 * returns the nvmlReturn_t code. A call the library does not export is absent (undefined).
 *
 * @example
 * ```ts
 * const count = Buffer.alloc(4);
 * if (api.nvmlDeviceGetCount_v2(count) === 0) console.log(readU32(count));
 * ```
 * @module
 */

/** An opaque NVML handle (a C pointer). @example const device: NvmlHandle = readU64(out); */
export type NvmlHandle = bigint;

type Call<Args extends unknown[]> = ((...args: Args) => number) | undefined;

/**
 * The NVML functions brim uses. Only init, shutdown, count and handle-by-index are required;
 * every other call degrades to "not available" when absent.
 *
 * @example
 * ```ts
 * const fake: NvmlApi = { library: "fake", nvmlInit_v2: () => 0, nvmlShutdown: () => 0, nvmlDeviceGetCount_v2: (n) => (writeU32(n, 0), 0), nvmlDeviceGetHandleByIndex_v2: () => 2 };
 * ```
 */
export interface NvmlApi {
  /** What was loaded (a path, or "fake" in tests), for notes. */
  readonly library: string;
  readonly nvmlInit_v2: () => number;
  readonly nvmlShutdown: () => number;
  readonly nvmlDeviceGetCount_v2: (count: Buffer) => number;
  readonly nvmlDeviceGetHandleByIndex_v2: (index: number, device: Buffer) => number;
  readonly nvmlErrorString?: ((code: number) => string) | undefined;
  readonly nvmlSystemGetDriverVersion?: Call<[version: Buffer, length: number]>;
  readonly nvmlSystemGetCudaDriverVersion_v2?: Call<[version: Buffer]>;
  readonly nvmlDeviceGetName?: Call<[device: NvmlHandle, name: Buffer, length: number]>;
  readonly nvmlDeviceGetUUID?: Call<[device: NvmlHandle, uuid: Buffer, length: number]>;
  readonly nvmlDeviceGetCudaComputeCapability?: Call<[device: NvmlHandle, major: Buffer, minor: Buffer]>;
  readonly nvmlDeviceGetMemoryInfo?: Call<[device: NvmlHandle, memory: Buffer]>;
  readonly nvmlDeviceGetMemoryInfo_v2?: Call<[device: NvmlHandle, memory: Buffer]>;
  readonly nvmlDeviceGetUtilizationRates?: Call<[device: NvmlHandle, utilization: Buffer]>;
  readonly nvmlDeviceGetSamples?: Call<[device: NvmlHandle, type: number, lastSeenTimeStamp: number, valueType: Buffer, count: Buffer, samples: Buffer | null]>;
  readonly nvmlDeviceGetComputeRunningProcesses_v3?: Call<[device: NvmlHandle, count: Buffer, infos: Buffer | null]>;
  readonly nvmlDeviceGetComputeRunningProcesses_v2?: Call<[device: NvmlHandle, count: Buffer, infos: Buffer | null]>;
  readonly nvmlDeviceGetComputeRunningProcesses?: Call<[device: NvmlHandle, count: Buffer, infos: Buffer | null]>;
  readonly nvmlDeviceGetProcessUtilization?: Call<[device: NvmlHandle, samples: Buffer | null, count: Buffer, lastSeenTimeStamp: number]>;
  readonly nvmlDeviceGetPowerUsage?: Call<[device: NvmlHandle, milliwatts: Buffer]>;
  readonly nvmlDeviceGetEnforcedPowerLimit?: Call<[device: NvmlHandle, milliwatts: Buffer]>;
  readonly nvmlDeviceGetTotalEnergyConsumption?: Call<[device: NvmlHandle, millijoules: Buffer]>;
  readonly nvmlDeviceGetClockInfo?: Call<[device: NvmlHandle, type: number, megahertz: Buffer]>;
  readonly nvmlDeviceGetCurrentClocksEventReasons?: Call<[device: NvmlHandle, reasons: Buffer]>;
  readonly nvmlDeviceGetCurrentClocksThrottleReasons?: Call<[device: NvmlHandle, reasons: Buffer]>;
  /** Blocks about 20 ms inside the driver, so the binding runs it off the main thread. */
  readonly nvmlDeviceGetPcieThroughput?: ((device: NvmlHandle, counter: number, kilobytesPerSecond: Buffer) => Promise<number>) | undefined;
  readonly nvmlGpmQueryDeviceSupport?: Call<[device: NvmlHandle, support: Buffer]>;
  readonly nvmlGpmSampleAlloc?: Call<[sample: Buffer]>;
  readonly nvmlGpmSampleFree?: Call<[sample: NvmlHandle]>;
  readonly nvmlGpmSampleGet?: Call<[device: NvmlHandle, sample: NvmlHandle]>;
  readonly nvmlGpmMetricsGet?: Call<[metrics: Buffer]>;
  readonly nvmlEventSetCreate?: Call<[set: Buffer]>;
  readonly nvmlDeviceRegisterEvents?: Call<[device: NvmlHandle, eventTypes: number, set: NvmlHandle]>;
  readonly nvmlEventSetWait_v2?: Call<[set: NvmlHandle, data: Buffer, timeoutMs: number]>;
  readonly nvmlEventSetFree?: Call<[set: NvmlHandle]>;
}

/** The names of NvmlApi's calls (every key but `library`). @example const name: NvmlFunctionName = "nvmlDeviceGetPowerUsage"; */
export type NvmlFunctionName = Exclude<keyof NvmlApi, "library">;
