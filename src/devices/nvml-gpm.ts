/**
 * GPM (GPU performance monitoring, Hopper and newer) for one GPU: two driver samples at least an
 * interval apart give the SM activity, occupancy, tensor and DRAM metrics between them.
 *
 * @example
 * ```ts
 * const gpm = new NvmlGpm(api, handle, calls, Date.now, 100);
 * gpm.setup();
 * gpm.read().get(GPM_METRIC.SM_UTIL);
 * ```
 * @module
 */
import type { NvmlApi, NvmlHandle } from "./nvml-api.ts";
import { OK, type NvmlCalls } from "./nvml-calls.ts";
import { GPM_METRIC, decodeGpmMetrics, encodeGpmMetricsRequest, encodeGpmSupportRequest, readU32, readU64 } from "./nvml-structs.ts";

/**
 * The GPM metrics of one GPU, by metric id (empty where GPM is not supported).
 *
 * @example
 * ```ts
 * new NvmlGpm(api, handle, calls, Date.now, 100).read(); // Map { 1 => 37.5, ... }
 * ```
 */
export class NvmlGpm {
  #api: NvmlApi;
  #handle: NvmlHandle;
  #calls: NvmlCalls;
  #nowMs: () => number;
  #intervalMs: number;
  #samples: [NvmlHandle, NvmlHandle] | null = null;
  #newer = 0;
  #takenAtMs: number | null = null;
  #values = new Map<number, number>();

  constructor(api: NvmlApi, handle: NvmlHandle, calls: NvmlCalls, nowMs: () => number, intervalMs: number) {
    this.#api = api;
    this.#handle = handle;
    this.#calls = calls;
    this.#nowMs = nowMs;
    this.#intervalMs = intervalMs;
  }

  /** Asks the GPU for GPM support and allocates the two samples; switches GPM off where either fails. */
  setup(): void {
    const api = this.#api;
    const h = this.#handle;
    const support = encodeGpmSupportRequest();
    if (this.#calls.invoke("gpm", () => api.nvmlGpmQueryDeviceSupport?.(h, support)) !== OK || readU32(support, 4) === 0) {
      this.#calls.turnOff("gpm");
      return;
    }
    if (api.nvmlGpmSampleGet === undefined || api.nvmlGpmMetricsGet === undefined) {
      this.#calls.turnOff("gpm");
      return;
    }
    const handles: NvmlHandle[] = [];
    for (let i = 0; i < 2; i++) {
      const out = Buffer.alloc(8);
      if (this.#calls.invoke("gpm", () => api.nvmlGpmSampleAlloc?.(out)) !== OK) break;
      handles.push(readU64(out));
    }
    const [first, second] = handles;
    if (first === undefined || second === undefined) {
      for (const sample of handles) api.nvmlGpmSampleFree?.(sample);
      this.#calls.turnOff("gpm");
      return;
    }
    this.#samples = [first, second];
  }

  /** The metrics between the last two samples; a new sample only once the interval has passed. */
  read(): Map<number, number> {
    const samples = this.#samples;
    if (samples === null || this.#calls.isOff("gpm")) return new Map();
    const now = this.#nowMs();
    if (this.#takenAtMs !== null && now - this.#takenAtMs < this.#intervalMs) return this.#values;
    const api = this.#api;
    const h = this.#handle;
    const [first, second] = samples;
    const older = this.#newer === 0 ? first : second;
    const spare = this.#newer === 0 ? second : first;
    if (this.#calls.invoke("gpm", () => api.nvmlGpmSampleGet?.(h, spare)) !== OK) return this.#values;
    if (this.#takenAtMs !== null) {
      const request = encodeGpmMetricsRequest(older, spare, Object.values(GPM_METRIC));
      if (this.#calls.invoke("gpm", () => api.nvmlGpmMetricsGet?.(request)) === OK) {
        this.#values = new Map(
          decodeGpmMetrics(request)
            .filter((m) => m.ret === OK && Number.isFinite(m.value))
            .map((m) => [m.metricId, m.value]),
        );
      }
    }
    this.#newer = 1 - this.#newer;
    this.#takenAtMs = now;
    return this.#values;
  }

  /** Frees the samples. */
  close(): void {
    for (const sample of this.#samples ?? []) this.#api.nvmlGpmSampleFree?.(sample);
    this.#samples = null;
  }
}
