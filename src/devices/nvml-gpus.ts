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
import {
  GPM_METRIC,
  NVML_CLOCK,
  NVML_EVENT_XID_CRITICAL,
  NVML_LAYOUT,
  NVML_PCIE,
  NVML_RETURN,
  NVML_SAMPLING,
  PROCESS_SENTINEL,
  decodeEventData,
  decodeGpmMetrics,
  decodeMemoryV1,
  decodeMemoryV2,
  decodeProcessEntries,
  decodeProcessUtilizationSamples,
  decodeSamples,
  decodeThrottleReasons,
  decodeUtilization,
  detectProcessStride,
  encodeGpmMetricsRequest,
  encodeGpmSupportRequest,
  encodeMemoryV2Request,
  latestProcessUtilization,
  nvmlReturnText,
  readCString,
  readU32,
  readU64,
  writeU32,
  type MemoryInfo,
  type ProcessEntry,
} from "./nvml-structs.ts";
import type { GpuFeature, GpuInfo, GpuProcess, GpuReading, UtilSample } from "./types.ts";

/** Xid errors after which the GPU needs a reset: 48 double-bit ECC, 79 fallen off the bus, 95 uncontained ECC. @example FATAL_XIDS.has(79); // true */
export const FATAL_XIDS: ReadonlySet<number> = new Set([48, 79, 95]);

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

const DISABLING: ReadonlySet<number> = new Set([
  NVML_RETURN.NOT_SUPPORTED,
  NVML_RETURN.NO_PERMISSION,
  NVML_RETURN.FUNCTION_NOT_FOUND,
  NVML_RETURN.ARGUMENT_VERSION_MISMATCH,
  NVML_RETURN.DEPRECATED,
]);
const LOSING: ReadonlySet<number> = new Set([NVML_RETURN.GPU_IS_LOST, NVML_RETURN.RESET_REQUIRED]);
const ANSWERS: ReadonlySet<number> = new Set([NVML_RETURN.SUCCESS, NVML_RETURN.NOT_FOUND, NVML_RETURN.INSUFFICIENT_SIZE]);
const MISSING = NVML_RETURN.FUNCTION_NOT_FOUND;
const OK = NVML_RETURN.SUCCESS;

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

class NvmlGpu {
  readonly index: number;
  readonly handle: NvmlHandle;
  xidEvents = false;
  #api: NvmlApi;
  #nowMs: () => number;
  #options: Required<Omit<NvmlGpusOptions, "nowMs">>;
  #off = new Set<string>();
  #answered = new Set<string>();
  #scratch = Buffer.alloc(8);
  #lost = false;
  #xids: number[] = [];
  #memory: MemoryInfo | null = null;
  #processStride: number | null = null;
  #processes: ProcessEntry[] = [];
  #utilLastSeenUs: number;
  #processUtilLastSeenUs: number;
  #processUtil = new Map<number, { smUtil: number; memUtil: number; seenAtMs: number }>();
  #gpmSamples: [NvmlHandle, NvmlHandle] | null = null;
  #gpmNewer = 0;
  #gpmTakenAtMs: number | null = null;
  #gpmValues = new Map<number, number>();

  constructor(api: NvmlApi, index: number, handle: NvmlHandle, nowMs: () => number, options: Required<Omit<NvmlGpusOptions, "nowMs">>) {
    this.#api = api;
    this.index = index;
    this.handle = handle;
    this.#nowMs = nowMs;
    this.#options = options;
    this.#utilLastSeenUs = (nowMs() - 1000) * 1000;
    this.#processUtilLastSeenUs = this.#utilLastSeenUs;
  }

  /** Makes one call unless it is missing or switched off; notes lost GPUs and unsupported calls. */
  #invoke(key: string, call: () => number | undefined): number {
    if (this.#off.has(key)) return MISSING;
    const ret = call();
    if (ret === undefined) {
      this.#off.add(key);
      return MISSING;
    }
    if (DISABLING.has(ret)) this.#off.add(key);
    else if (ANSWERS.has(ret)) this.#answered.add(key);
    if (LOSING.has(ret)) this.#lost = true;
    return ret;
  }

  #u32(key: string, call: (out: Buffer) => number | undefined): number | null {
    const out = this.#scratch;
    return this.#invoke(key, () => call(out)) === OK ? readU32(out) : null;
  }

  #u64(key: string, call: (out: Buffer) => number | undefined): bigint | null {
    const out = this.#scratch;
    return this.#invoke(key, () => call(out)) === OK ? readU64(out) : null;
  }

  #text(key: string, length: number, call: (out: Buffer, length: number) => number | undefined): string | null {
    const out = Buffer.alloc(length);
    return this.#invoke(key, () => call(out, length)) === OK ? readCString(out) : null;
  }

  identify(): Omit<GpuInfo, "available"> {
    const api = this.#api;
    const h = this.handle;
    const major = Buffer.alloc(4);
    const minor = Buffer.alloc(4);
    const capability =
      this.#invoke("capability", () => api.nvmlDeviceGetCudaComputeCapability?.(h, major, minor)) === OK ? `${readU32(major)}.${readU32(minor)}` : null;
    this.#memory = this.#readMemory();
    return {
      index: this.index,
      name: this.#text("name", NVML_LAYOUT.nameLength, (out, n) => api.nvmlDeviceGetName?.(h, out, n)) ?? "NVIDIA GPU",
      uuid: this.#text("uuid", NVML_LAYOUT.nameLength, (out, n) => api.nvmlDeviceGetUUID?.(h, out, n)),
      totalBytes: this.#memory?.totalBytes ?? 0,
      computeCapability: capability,
    };
  }

  /** The features whose calls have answered so far (the list grows once a process runs, or after the first PCIe read). */
  available(): GpuFeature[] {
    const answered = (key: string): boolean => this.#answered.has(key) && !this.#off.has(key);
    const features = (Object.entries(FEATURE_KEYS) as [GpuFeature, readonly string[]][]).filter(([, keys]) => keys.some(answered)).map(([feature]) => feature);
    if (this.xidEvents) features.push("xid_events");
    return features;
  }

  noteXid(xid: number): void {
    this.#xids.push(xid);
    if (FATAL_XIDS.has(xid)) this.#lost = true;
  }

  #readMemory(): MemoryInfo | null {
    const api = this.#api;
    const h = this.handle;
    const v2 = encodeMemoryV2Request();
    if (this.#invoke("memory_v2", () => api.nvmlDeviceGetMemoryInfo_v2?.(h, v2)) === OK) return decodeMemoryV2(v2);
    const v1 = Buffer.alloc(NVML_LAYOUT.memoryV1Size);
    return this.#invoke("memory_v1", () => api.nvmlDeviceGetMemoryInfo?.(h, v1)) === OK ? decodeMemoryV1(v1) : null;
  }

  #readUtilSamples(): UtilSample[] | null {
    const fn = this.#api.nvmlDeviceGetSamples;
    const h = this.handle;
    const lastSeen = this.#utilLastSeenUs;
    const valueType = Buffer.alloc(4);
    const count = Buffer.alloc(4);
    let ret = this.#invoke("util_samples", () => fn?.(h, NVML_SAMPLING.GPU_UTILIZATION, lastSeen, valueType, count, null));
    if (ret === NVML_RETURN.NOT_FOUND) return [];
    if (ret !== OK && ret !== NVML_RETURN.INSUFFICIENT_SIZE) return null;
    const capacity = readU32(count);
    if (capacity === 0) return [];
    const buffer = Buffer.alloc(capacity * NVML_LAYOUT.sampleSize);
    ret = this.#invoke("util_samples", () => fn?.(h, NVML_SAMPLING.GPU_UTILIZATION, lastSeen, valueType, count, buffer));
    if (ret === NVML_RETURN.NOT_FOUND) return [];
    if (ret !== OK) return null;
    const fresh = decodeSamples(buffer, Math.min(readU32(count), capacity), readU32(valueType)).filter((s) => s.timestampUs > lastSeen);
    for (const s of fresh) this.#utilLastSeenUs = Math.max(this.#utilLastSeenUs, s.timestampUs);
    return fresh.map((s) => ({ t: s.timestampUs / 1e6, value: s.value }));
  }

  #processCall(): [key: string, call: NonNullable<NvmlApi["nvmlDeviceGetComputeRunningProcesses"]>, nominalStride: number] | null {
    const api = this.#api;
    const candidates = [
      ["processes_v3", api.nvmlDeviceGetComputeRunningProcesses_v3, 24],
      ["processes_v2", api.nvmlDeviceGetComputeRunningProcesses_v2, 24],
      ["processes_v1", api.nvmlDeviceGetComputeRunningProcesses, 16],
    ] as const;
    for (const [key, call, stride] of candidates) if (call !== undefined && !this.#off.has(key)) return [key, call, stride];
    this.#off.add("processes");
    return null;
  }

  /** The count protocol: ask with 0, get INSUFFICIENT_SIZE and the count, allocate count*2+5 entries at the widest stride. */
  #readProcesses(): ProcessEntry[] | null {
    for (;;) {
      const picked = this.#processCall();
      if (picked === null) return null;
      const [key, call, nominalStride] = picked;
      const h = this.handle;
      const count = Buffer.alloc(4);
      let ret = this.#invoke(key, () => call(h, count, null));
      if (ret === OK) return [];
      for (let attempt = 0; attempt < 3 && ret === NVML_RETURN.INSUFFICIENT_SIZE; attempt++) {
        const capacity = readU32(count) * 2 + 5;
        const infos = Buffer.alloc(capacity * 32, PROCESS_SENTINEL);
        writeU32(count, capacity);
        ret = this.#invoke(key, () => call(h, count, infos));
        if (ret === OK) {
          const n = Math.min(readU32(count), capacity);
          if (n === 0) return [];
          this.#processStride ??= detectProcessStride(infos, n);
          return decodeProcessEntries(infos, n, this.#processStride ?? nominalStride);
        }
      }
      if (!this.#off.has(key)) return null;
    }
  }

  #readProcessUtil(): void {
    const fn = this.#api.nvmlDeviceGetProcessUtilization;
    const h = this.handle;
    const lastSeen = this.#processUtilLastSeenUs;
    const count = Buffer.alloc(4);
    let ret = this.#invoke("process_util", () => fn?.(h, null, count, lastSeen));
    if (ret === OK || ret === NVML_RETURN.INSUFFICIENT_SIZE) {
      const capacity = readU32(count) + 8;
      const samples = Buffer.alloc(capacity * NVML_LAYOUT.processUtilizationSampleSize);
      writeU32(count, capacity);
      ret = this.#invoke("process_util", () => fn?.(h, samples, count, lastSeen));
      if (ret === OK) {
        const decoded = decodeProcessUtilizationSamples(samples, Math.min(readU32(count), capacity));
        const now = this.#nowMs();
        for (const [pid, util] of latestProcessUtilization(decoded)) this.#processUtil.set(pid, { smUtil: util.smUtil, memUtil: util.memUtil, seenAtMs: now });
        for (const s of decoded) this.#processUtilLastSeenUs = Math.max(this.#processUtilLastSeenUs, s.timestampUs);
      }
    }
    const expired = this.#nowMs() - this.#options.processUtilKeepMs;
    for (const [pid, util] of this.#processUtil) if (util.seenAtMs < expired) this.#processUtil.delete(pid);
  }

  setupGpm(): void {
    const api = this.#api;
    const h = this.handle;
    const support = encodeGpmSupportRequest();
    if (this.#invoke("gpm", () => api.nvmlGpmQueryDeviceSupport?.(h, support)) !== OK || readU32(support, 4) === 0) {
      this.#off.add("gpm");
      return;
    }
    if (api.nvmlGpmSampleGet === undefined || api.nvmlGpmMetricsGet === undefined) {
      this.#off.add("gpm");
      return;
    }
    const handles: NvmlHandle[] = [];
    for (let i = 0; i < 2; i++) {
      const out = Buffer.alloc(8);
      if (this.#invoke("gpm", () => api.nvmlGpmSampleAlloc?.(out)) !== OK) break;
      handles.push(readU64(out));
    }
    const [first, second] = handles;
    if (first === undefined || second === undefined) {
      for (const sample of handles) api.nvmlGpmSampleFree?.(sample);
      this.#off.add("gpm");
      return;
    }
    this.#gpmSamples = [first, second];
  }

  #readGpm(): Map<number, number> {
    const samples = this.#gpmSamples;
    if (samples === null || this.#off.has("gpm")) return new Map();
    const now = this.#nowMs();
    if (this.#gpmTakenAtMs !== null && now - this.#gpmTakenAtMs < this.#options.gpmIntervalMs) return this.#gpmValues;
    const api = this.#api;
    const h = this.handle;
    const [first, second] = samples;
    const older = this.#gpmNewer === 0 ? first : second;
    const spare = this.#gpmNewer === 0 ? second : first;
    if (this.#invoke("gpm", () => api.nvmlGpmSampleGet?.(h, spare)) !== OK) return this.#gpmValues;
    if (this.#gpmTakenAtMs !== null) {
      const request = encodeGpmMetricsRequest(older, spare, Object.values(GPM_METRIC));
      if (this.#invoke("gpm", () => api.nvmlGpmMetricsGet?.(request)) === OK) {
        this.#gpmValues = new Map(
          decodeGpmMetrics(request)
            .filter((m) => m.ret === OK && Number.isFinite(m.value))
            .map((m) => [m.metricId, m.value]),
        );
      }
    }
    this.#gpmNewer = 1 - this.#gpmNewer;
    this.#gpmTakenAtMs = now;
    return this.#gpmValues;
  }

  async #readPcie(): Promise<[number | null, number | null]> {
    const fn = this.#api.nvmlDeviceGetPcieThroughput;
    const h = this.handle;
    const one = async (key: string, counter: number): Promise<number | null> => {
      if (fn === undefined || this.#off.has(key)) {
        this.#off.add(key);
        return null;
      }
      const out = Buffer.alloc(4);
      const ret = await fn(h, counter, out);
      return this.#invoke(key, () => ret) === OK ? readU32(out) : null;
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
    const sampledAt = this.#nowMs() / 1000;
    this.#memory = this.#readMemory() ?? this.#memory;
    const utilization = Buffer.alloc(NVML_LAYOUT.utilizationSize);
    const util = this.#invoke("util", () => api.nvmlDeviceGetUtilizationRates?.(h, utilization)) === OK ? decodeUtilization(utilization) : null;
    const utilSamples = this.#readUtilSamples();
    // A list that fails to come back this once keeps the previous one rather than reading as "no processes".
    this.#processes = this.#readProcesses() ?? (this.#off.has("processes") ? [] : this.#processes);
    if (this.#processes.length > 0) this.#readProcessUtil();
    const processes: GpuProcess[] = this.#processes.map((e) => {
      const u = this.#processUtil.get(e.pid);
      return { pid: e.pid, usedBytes: e.usedBytes, smUtil: u?.smUtil ?? null, memUtil: u?.memUtil ?? null };
    });
    const powerMw = this.#u32("power", (out) => api.nvmlDeviceGetPowerUsage?.(h, out));
    const limitMw = this.#u32("power_limit", (out) => api.nvmlDeviceGetEnforcedPowerLimit?.(h, out));
    const energyMj = this.#u64("energy", (out) => api.nvmlDeviceGetTotalEnergyConsumption?.(h, out));
    const smClock = this.#u32("clock_sm", (out) => api.nvmlDeviceGetClockInfo?.(h, NVML_CLOCK.SM, out));
    const memClock = this.#u32("clock_mem", (out) => api.nvmlDeviceGetClockInfo?.(h, NVML_CLOCK.MEM, out));
    const reasons =
      this.#u64("throttle", (out) => api.nvmlDeviceGetCurrentClocksEventReasons?.(h, out)) ??
      this.#u64("throttle_legacy", (out) => (this.#off.has("throttle") ? api.nvmlDeviceGetCurrentClocksThrottleReasons?.(h, out) : undefined));
    const gpm = this.#readGpm();
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
      lost: this.#lost,
      sampledAt,
    };
  }

  close(): void {
    for (const sample of this.#gpmSamples ?? []) this.#api.nvmlGpmSampleFree?.(sample);
    this.#gpmSamples = null;
  }
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
