/**
 * GPUs read through NVML: inventory at open, then one {@link GpuReading} per GPU on each read.
 * Talks only to an {@link NvmlApi}, so a fake driver drives it in tests. Every optional call
 * degrades to null; a call that answers NOT_SUPPORTED (or is missing) is not made again.
 *
 * @example
 * ```ts
 * const opened = openNvmlGpus(api);
 * if ("gpus" in opened) console.log(await opened.gpus.read());
 * ```
 * @module
 */
import type { NvmlApi, NvmlHandle } from "./nvml-api.ts";
import { OK } from "./nvml-calls.ts";
import { NvmlGpu } from "./nvml-gpu.ts";
import { NVML_EVENT_XID_CRITICAL, NVML_LAYOUT, decodeEventData, nvmlReturnText, readCString, readU32, readU64 } from "./nvml-structs.ts";
import type { GpuInfo, GpuReading } from "./types.ts";

export { FATAL_XIDS } from "./nvml-gpu.ts";

/**
 * Tuning of {@link openNvmlGpus}; the defaults suit a 10 Hz sampler.
 *
 * @example
 * ```ts
 * openNvmlGpus(api, { nowMs: () => fakeClock });
 * ```
 */
export interface NvmlGpusOptions {
  /** The clock, in milliseconds since the epoch (tests pass a fake one). */
  nowMs?: () => number;
  /** GPM metrics need two samples at least this far apart (nvml.h says more than 100 ms). */
  gpmIntervalMs?: number;
  /** A process's utilization is kept this long after its latest driver sample. */
  processUtilKeepMs?: number;
}

/**
 * The GPUs NVML sees, opened.
 *
 * @example
 * ```ts
 * const readings = await gpus.read();
 * gpus.close();
 * ```
 */
export interface NvmlGpus {
  readonly driver: string | null;
  readonly cuda: string | null;
  readonly gpus: GpuInfo[];
  read(): Promise<GpuReading[]>;
  close(): void;
}

function errorText(api: NvmlApi, code: number): string {
  try {
    const text = api.nvmlErrorString?.(code);
    if (typeof text === "string" && text !== "") return text;
  } catch {
    // Fall back to brim's own words.
  }
  return nvmlReturnText(code);
}

function cudaVersionText(version: number): string {
  return `${Math.floor(version / 1000)}.${Math.floor((version % 1000) / 10)}`;
}

/**
 * Initializes NVML through `api` and finds its GPUs; never throws. On failure `error` is one line
 * naming the NVML call and its error, and NVML is shut down again.
 *
 * @example
 * ```ts
 * const opened = openNvmlGpus(api);
 * if ("error" in opened) console.log(opened.error); // "nvmlInit_v2: Driver Not Loaded"
 * ```
 */
export function openNvmlGpus(api: NvmlApi, options: NvmlGpusOptions = {}): { gpus: NvmlGpus } | { error: string } {
  const nowMs = options.nowMs ?? Date.now;
  const tuning = { gpmIntervalMs: options.gpmIntervalMs ?? 100, processUtilKeepMs: options.processUtilKeepMs ?? 2000 };
  const init = api.nvmlInit_v2();
  if (init !== OK) return { error: `nvmlInit_v2: ${errorText(api, init)}` };
  const countOut = Buffer.alloc(4);
  const counted = api.nvmlDeviceGetCount_v2(countOut);
  if (counted !== OK) {
    api.nvmlShutdown();
    return { error: `nvmlDeviceGetCount_v2: ${errorText(api, counted)}` };
  }
  const devices: NvmlGpu[] = [];
  for (let index = 0; index < readU32(countOut); index++) {
    const out = Buffer.alloc(8);
    // A GPU this process may not open (another container's) is left out rather than failing the rest.
    if (api.nvmlDeviceGetHandleByIndex_v2(index, out) === OK) devices.push(new NvmlGpu(api, index, readU64(out), nowMs, tuning));
  }

  const driverOut = Buffer.alloc(NVML_LAYOUT.driverVersionLength);
  const driver = api.nvmlSystemGetDriverVersion?.(driverOut, driverOut.length) === OK ? readCString(driverOut) : null;
  const cudaOut = Buffer.alloc(4);
  const cuda = api.nvmlSystemGetCudaDriverVersion_v2?.(cudaOut) === OK ? cudaVersionText(readU32(cudaOut)) : null;

  let eventSet: NvmlHandle | null = null;
  const setOut = Buffer.alloc(8);
  if (api.nvmlEventSetWait_v2 !== undefined && api.nvmlDeviceRegisterEvents !== undefined && api.nvmlEventSetCreate?.(setOut) === OK) {
    const set = readU64(setOut);
    for (const device of devices) device.xidEvents = api.nvmlDeviceRegisterEvents(device.handle, NVML_EVENT_XID_CRITICAL, set) === OK;
    if (devices.some((d) => d.xidEvents)) eventSet = set;
    else api.nvmlEventSetFree?.(set);
  }

  const identities = devices.map((d) => d.identify());
  for (const device of devices) device.setupGpm();

  const drainXids = (): void => {
    if (eventSet === null) return;
    const data = Buffer.alloc(NVML_LAYOUT.eventDataSize);
    for (let i = 0; i < 64 && api.nvmlEventSetWait_v2?.(eventSet, data, 0) === OK; i++) {
      const event = decodeEventData(data);
      devices.find((d) => d.handle === event.device)?.noteXid(event.xid);
    }
  };
  let closed = false;
  let reading: Promise<GpuReading[]> | null = null;
  const read = (): Promise<GpuReading[]> => {
    if (closed) return Promise.resolve([]);
    drainXids();
    const current = Promise.all(devices.map((d) => d.read()));
    reading = current;
    const settled = (): void => {
      if (reading === current) reading = null;
    };
    current.then(settled, settled);
    return current;
  };
  const shutdown = (): void => {
    for (const device of devices) device.close();
    if (eventSet !== null) api.nvmlEventSetFree?.(eventSet);
    api.nvmlShutdown();
  };

  drainXids();
  for (const device of devices) device.readWithoutPcie();
  return {
    gpus: {
      driver,
      cuda,
      get gpus(): GpuInfo[] {
        return identities.map((identity, i) => ({ ...identity, available: devices[i]?.available() ?? [] }));
      },
      read,
      close: () => {
        if (closed) return;
        closed = true;
        // A PCIe call may still be running on a worker thread: shut NVML down after it returns.
        if (reading === null) shutdown();
        else void reading.then(shutdown, shutdown);
      },
    },
  };
}
