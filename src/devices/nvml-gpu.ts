/**
 * One GPU read through NVML: its identity at open, then one {@link GpuReading} per read (memory,
 * utilization and its samples, processes, power, energy, clocks, throttle reasons, GPM, PCIe, Xids).
 *
 * @example
 * ```ts
 * const gpu = new NvmlGpu(api, 0, handle, Date.now, { gpmIntervalMs: 100, processUtilKeepMs: 2000 });
 * gpu.identify().name;
 * (await gpu.read()).powerW;
 * ```
 * @module
 */
import type { NvmlApi, NvmlHandle } from "./nvml-api.ts";
import { NvmlCalls, OK } from "./nvml-calls.ts";
import { NvmlGpm } from "./nvml-gpm.ts";
import { NvmlProcesses } from "./nvml-processes.ts";
import {
  GPM_METRIC,
  NVML_CLOCK,
  NVML_LAYOUT,
  NVML_PCIE,
  NVML_RETURN,
  NVML_SAMPLING,
  decodeMemoryV1,
  decodeMemoryV2,
  decodeSamples,
  decodeThrottleReasons,
  decodeUtilization,
  encodeMemoryV2Request,
  readU32,
  type MemoryInfo,
} from "./nvml-structs.ts";
import type { GpuFeature, GpuInfo, GpuReading, UtilSample } from "./types.ts";

/** Xid errors after which the GPU needs a reset: 48 double-bit ECC, 79 fallen off the bus, 95 uncontained ECC. @example FATAL_XIDS.has(79); // true */
export const FATAL_XIDS: ReadonlySet<number> = new Set([48, 79, 95]);

/** How often GPM samples and how long a process's utilization is kept (see NvmlGpusOptions). */
export interface NvmlGpuTuning {
  gpmIntervalMs: number;
  processUtilKeepMs: number;
}

const FEATURE_KEYS: Record<Exclude<GpuFeature, "xid_events">, readonly string[]> = {
  util: ["util"],
  util_samples: ["util_samples"],
  processes: ["processes_v3", "processes_v2", "processes_v1"],
  process_util: ["process_util"],
  power: ["power"],
  power_limit: ["power_limit"],
  energy: ["energy"],
  clocks: ["clock_sm", "clock_mem"],
  throttle: ["throttle", "throttle_legacy"],
  pcie: ["pcie_tx", "pcie_rx"],
  gpm: ["gpm"],
};

/**
 * One GPU NVML opened.
 *
 * @example
 * ```ts
 * new NvmlGpu(api, 0, handle, Date.now, { gpmIntervalMs: 100, processUtilKeepMs: 2000 }).readWithoutPcie().usedBytes;
 * ```
 */
export class NvmlGpu {
  readonly index: number;
  readonly handle: NvmlHandle;
  xidEvents = false;
  #api: NvmlApi;
  #nowMs: () => number;
  #calls = new NvmlCalls();
  #processes: NvmlProcesses;
  #gpm: NvmlGpm;
  #xids: number[] = [];
  #memory: MemoryInfo | null = null;
  #utilLastSeenUs: number;

  constructor(api: NvmlApi, index: number, handle: NvmlHandle, nowMs: () => number, tuning: NvmlGpuTuning) {
    this.#api = api;
    this.index = index;
    this.handle = handle;
    this.#nowMs = nowMs;
    this.#utilLastSeenUs = (nowMs() - 1000) * 1000;
    this.#processes = new NvmlProcesses(api, handle, this.#calls, nowMs, tuning.processUtilKeepMs, this.#utilLastSeenUs);
    this.#gpm = new NvmlGpm(api, handle, this.#calls, nowMs, tuning.gpmIntervalMs);
  }

  identify(): Omit<GpuInfo, "available"> {
    const api = this.#api;
    const h = this.handle;
    const calls = this.#calls;
    const major = Buffer.alloc(4);
    const minor = Buffer.alloc(4);
    const capability =
      calls.invoke("capability", () => api.nvmlDeviceGetCudaComputeCapability?.(h, major, minor)) === OK ? `${readU32(major)}.${readU32(minor)}` : null;
    this.#memory = this.#readMemory();
    return {
      index: this.index,
      name: calls.text("name", NVML_LAYOUT.nameLength, (out, n) => api.nvmlDeviceGetName?.(h, out, n)) ?? "NVIDIA GPU",
      uuid: calls.text("uuid", NVML_LAYOUT.nameLength, (out, n) => api.nvmlDeviceGetUUID?.(h, out, n)),
      totalBytes: this.#memory?.totalBytes ?? 0,
      computeCapability: capability,
    };
  }

  /** The features whose calls have answered so far (the list grows once a process runs, or after the first PCIe read). */
  available(): GpuFeature[] {
    const features = (Object.entries(FEATURE_KEYS) as [GpuFeature, readonly string[]][])
      .filter(([, keys]) => keys.some((key) => this.#calls.answers(key)))
      .map(([feature]) => feature);
    if (this.xidEvents) features.push("xid_events");
    return features;
  }

  noteXid(xid: number): void {
    this.#xids.push(xid);
    if (FATAL_XIDS.has(xid)) this.#calls.lost = true;
  }

  setupGpm(): void {
    this.#gpm.setup();
  }

  #readMemory(): MemoryInfo | null {
    const api = this.#api;
    const h = this.handle;
    const v2 = encodeMemoryV2Request();
    if (this.#calls.invoke("memory_v2", () => api.nvmlDeviceGetMemoryInfo_v2?.(h, v2)) === OK) return decodeMemoryV2(v2);
    const v1 = Buffer.alloc(NVML_LAYOUT.memoryV1Size);
    return this.#calls.invoke("memory_v1", () => api.nvmlDeviceGetMemoryInfo?.(h, v1)) === OK ? decodeMemoryV1(v1) : null;
  }

  #readUtilSamples(): UtilSample[] | null {
    const fn = this.#api.nvmlDeviceGetSamples;
    const h = this.handle;
    const lastSeen = this.#utilLastSeenUs;
    const valueType = Buffer.alloc(4);
    const count = Buffer.alloc(4);
    let ret = this.#calls.invoke("util_samples", () => fn?.(h, NVML_SAMPLING.GPU_UTILIZATION, lastSeen, valueType, count, null));
    if (ret === NVML_RETURN.NOT_FOUND) return [];
    if (ret !== OK && ret !== NVML_RETURN.INSUFFICIENT_SIZE) return null;
    const capacity = readU32(count);
    if (capacity === 0) return [];
    const buffer = Buffer.alloc(capacity * NVML_LAYOUT.sampleSize);
    ret = this.#calls.invoke("util_samples", () => fn?.(h, NVML_SAMPLING.GPU_UTILIZATION, lastSeen, valueType, count, buffer));
    if (ret === NVML_RETURN.NOT_FOUND) return [];
    if (ret !== OK) return null;
    const fresh = decodeSamples(buffer, Math.min(readU32(count), capacity), readU32(valueType)).filter((s) => s.timestampUs > lastSeen);
    for (const s of fresh) this.#utilLastSeenUs = Math.max(this.#utilLastSeenUs, s.timestampUs);
    return fresh.map((s) => ({ t: s.timestampUs / 1e6, value: s.value }));
  }

  async #readPcie(): Promise<[number | null, number | null]> {
    const fn = this.#api.nvmlDeviceGetPcieThroughput;
    const h = this.handle;
    const one = async (key: string, counter: number): Promise<number | null> => {
      if (fn === undefined || this.#calls.isOff(key)) {
        this.#calls.turnOff(key);
        return null;
      }
      const out = Buffer.alloc(4);
      const ret = await fn(h, counter, out);
      return this.#calls.invoke(key, () => ret) === OK ? readU32(out) : null;
    };
    return Promise.all([one("pcie_tx", NVML_PCIE.TX), one("pcie_rx", NVML_PCIE.RX)]);
  }

  async read(): Promise<GpuReading> {
    const pcie = this.#readPcie();
    const reading = this.readWithoutPcie();
    const [pcieTxKBs, pcieRxKBs] = await pcie;
    return { ...reading, pcieTxKBs, pcieRxKBs };
  }

  /** Every reading but PCIe throughput, which blocks in the driver and so is asynchronous. */
  readWithoutPcie(): GpuReading {
    const api = this.#api;
    const h = this.handle;
    const calls = this.#calls;
    const sampledAt = this.#nowMs() / 1000;
    this.#memory = this.#readMemory() ?? this.#memory;
    const utilization = Buffer.alloc(NVML_LAYOUT.utilizationSize);
    const util = calls.invoke("util", () => api.nvmlDeviceGetUtilizationRates?.(h, utilization)) === OK ? decodeUtilization(utilization) : null;
    const utilSamples = this.#readUtilSamples();
    const processes = this.#processes.read();
    const powerMw = calls.u32("power", (out) => api.nvmlDeviceGetPowerUsage?.(h, out));
    const limitMw = calls.u32("power_limit", (out) => api.nvmlDeviceGetEnforcedPowerLimit?.(h, out));
    const energyMj = calls.u64("energy", (out) => api.nvmlDeviceGetTotalEnergyConsumption?.(h, out));
    const smClock = calls.u32("clock_sm", (out) => api.nvmlDeviceGetClockInfo?.(h, NVML_CLOCK.SM, out));
    const memClock = calls.u32("clock_mem", (out) => api.nvmlDeviceGetClockInfo?.(h, NVML_CLOCK.MEM, out));
    const reasons =
      calls.u64("throttle", (out) => api.nvmlDeviceGetCurrentClocksEventReasons?.(h, out)) ??
      calls.u64("throttle_legacy", (out) => (calls.isOff("throttle") ? api.nvmlDeviceGetCurrentClocksThrottleReasons?.(h, out) : undefined));
    const gpm = this.#gpm.read();
    const xids = this.#xids;
    this.#xids = [];
    return {
      index: this.index,
      usedBytes: this.#memory?.usedBytes ?? 0,
      totalBytes: this.#memory?.totalBytes ?? 0,
      reservedBytes: this.#memory?.reservedBytes ?? null,
      util: util?.gpu ?? null,
      memUtil: util?.memory ?? null,
      utilSamples,
      smActivity: gpm.get(GPM_METRIC.SM_UTIL) ?? null,
      smOccupancy: gpm.get(GPM_METRIC.SM_OCCUPANCY) ?? null,
      tensorActivity: gpm.get(GPM_METRIC.ANY_TENSOR_UTIL) ?? null,
      dramBandwidth: gpm.get(GPM_METRIC.DRAM_BW_UTIL) ?? null,
      powerW: powerMw === null ? null : powerMw / 1000,
      powerLimitW: limitMw === null ? null : limitMw / 1000,
      energyJ: energyMj === null ? null : Number(energyMj) / 1000,
      smClockMHz: smClock,
      memClockMHz: memClock,
      throttle: reasons === null ? null : decodeThrottleReasons(reasons),
      pcieTxKBs: null,
      pcieRxKBs: null,
      processes,
      xids,
      lost: calls.lost,
      sampledAt,
    };
  }

  close(): void {
    this.#gpm.close();
  }
}
