/**
 * The compute processes on one GPU through NVML, with each one's SM and memory utilization from the
 * driver's process samples (kept a while after the latest, so a reading between samples has them).
 *
 * @example
 * ```ts
 * const processes = new NvmlProcesses(api, handle, calls, Date.now, 2000, (Date.now() - 1000) * 1000);
 * processes.read()[0]?.usedBytes;
 * ```
 * @module
 */
import type { NvmlApi, NvmlHandle } from "./nvml-api.ts";
import { OK, type NvmlCalls } from "./nvml-calls.ts";
import {
  NVML_LAYOUT,
  NVML_RETURN,
  PROCESS_SENTINEL,
  decodeProcessEntries,
  decodeProcessUtilizationSamples,
  detectProcessStride,
  latestProcessUtilization,
  readU32,
  writeU32,
  type ProcessEntry,
} from "./nvml-structs.ts";
import type { GpuProcess } from "./types.ts";

/**
 * The process list of one GPU, read on each reading.
 *
 * @example
 * ```ts
 * new NvmlProcesses(api, handle, calls, Date.now, 2000, (Date.now() - 1000) * 1000).read();
 * ```
 */
export class NvmlProcesses {
  #api: NvmlApi;
  #handle: NvmlHandle;
  #calls: NvmlCalls;
  #nowMs: () => number;
  #keepMs: number;
  #stride: number | null = null;
  #entries: ProcessEntry[] = [];
  #utilLastSeenUs: number;
  #util = new Map<number, { smUtil: number; memUtil: number; seenAtMs: number }>();

  /** `sinceUs`: driver samples from before this time (µs since the epoch) are not read. */
  constructor(api: NvmlApi, handle: NvmlHandle, calls: NvmlCalls, nowMs: () => number, keepMs: number, sinceUs: number) {
    this.#api = api;
    this.#handle = handle;
    this.#calls = calls;
    this.#nowMs = nowMs;
    this.#keepMs = keepMs;
    this.#utilLastSeenUs = sinceUs;
  }

  /** The processes now, with their utilization where the driver sampled it. */
  read(): GpuProcess[] {
    // A list that fails to come back this once keeps the previous one rather than reading as "no processes".
    this.#entries = this.#readEntries() ?? (this.#calls.isOff("processes") ? [] : this.#entries);
    if (this.#entries.length > 0) this.#readUtil();
    return this.#entries.map((e) => {
      const u = this.#util.get(e.pid);
      return { pid: e.pid, usedBytes: e.usedBytes, smUtil: u?.smUtil ?? null, memUtil: u?.memUtil ?? null };
    });
  }

  #pickCall(): [key: string, call: NonNullable<NvmlApi["nvmlDeviceGetComputeRunningProcesses"]>, nominalStride: number] | null {
    const api = this.#api;
    const candidates = [
      ["processes_v3", api.nvmlDeviceGetComputeRunningProcesses_v3, 24],
      ["processes_v2", api.nvmlDeviceGetComputeRunningProcesses_v2, 24],
      ["processes_v1", api.nvmlDeviceGetComputeRunningProcesses, 16],
    ] as const;
    for (const [key, call, stride] of candidates) if (call !== undefined && !this.#calls.isOff(key)) return [key, call, stride];
    this.#calls.turnOff("processes");
    return null;
  }

  /** The count protocol: ask with 0, get INSUFFICIENT_SIZE and the count, allocate count*2+5 entries at the widest stride. */
  #readEntries(): ProcessEntry[] | null {
    for (;;) {
      const picked = this.#pickCall();
      if (picked === null) return null;
      const [key, call, nominalStride] = picked;
      const h = this.#handle;
      const count = Buffer.alloc(4);
      let ret = this.#calls.invoke(key, () => call(h, count, null));
      if (ret === OK) return [];
      for (let attempt = 0; attempt < 3 && ret === NVML_RETURN.INSUFFICIENT_SIZE; attempt++) {
        const capacity = readU32(count) * 2 + 5;
        const infos = Buffer.alloc(capacity * 32, PROCESS_SENTINEL);
        writeU32(count, capacity);
        ret = this.#calls.invoke(key, () => call(h, count, infos));
        if (ret === OK) {
          const n = Math.min(readU32(count), capacity);
          if (n === 0) return [];
          this.#stride ??= detectProcessStride(infos, n);
          return decodeProcessEntries(infos, n, this.#stride ?? nominalStride);
        }
      }
      if (!this.#calls.isOff(key)) return null;
    }
  }

  #readUtil(): void {
    const fn = this.#api.nvmlDeviceGetProcessUtilization;
    const h = this.#handle;
    const lastSeen = this.#utilLastSeenUs;
    const count = Buffer.alloc(4);
    let ret = this.#calls.invoke("process_util", () => fn?.(h, null, count, lastSeen));
    if (ret === OK || ret === NVML_RETURN.INSUFFICIENT_SIZE) {
      const capacity = readU32(count) + 8;
      const samples = Buffer.alloc(capacity * NVML_LAYOUT.processUtilizationSampleSize);
      writeU32(count, capacity);
      ret = this.#calls.invoke("process_util", () => fn?.(h, samples, count, lastSeen));
      if (ret === OK) {
        const decoded = decodeProcessUtilizationSamples(samples, Math.min(readU32(count), capacity));
        const now = this.#nowMs();
        for (const [pid, util] of latestProcessUtilization(decoded)) this.#util.set(pid, { smUtil: util.smUtil, memUtil: util.memUtil, seenAtMs: now });
        for (const s of decoded) this.#utilLastSeenUs = Math.max(this.#utilLastSeenUs, s.timestampUs);
      }
    }
    const expired = this.#nowMs() - this.#keepMs;
    for (const [pid, util] of this.#util) if (util.seenAtMs < expired) this.#util.delete(pid);
  }
}
