/**
 * NVML's structs as nvml.h lays them out on LP64 Linux, read from and written into plain bytes.
 * Pure: no library calls here, so every decoder is tested against hand-built buffers.
 *
 * @example
 * ```ts
 * import { decodeMemoryV2, encodeMemoryV2Request } from "./nvml-structs.ts";
 * const buffer = encodeMemoryV2Request();
 * // ... nvmlDeviceGetMemoryInfo_v2(device, buffer) ...
 * const memory = decodeMemoryV2(buffer);
 * ```
 * @module
 */

/**
 * NVML return codes brim acts on (nvmlReturn_t).
 *
 * @example
 * ```ts
 * if (ret === NVML_RETURN.NOT_SUPPORTED) return null;
 * ```
 */
export const NVML_RETURN = {
  SUCCESS: 0,
  UNINITIALIZED: 1,
  INVALID_ARGUMENT: 2,
  NOT_SUPPORTED: 3,
  NO_PERMISSION: 4,
  ALREADY_INITIALIZED: 5,
  NOT_FOUND: 6,
  INSUFFICIENT_SIZE: 7,
  DRIVER_NOT_LOADED: 9,
  TIMEOUT: 10,
  LIBRARY_NOT_FOUND: 12,
  FUNCTION_NOT_FOUND: 13,
  RESET_REQUIRED: 14,
  GPU_IS_LOST: 15,
  OPERATING_SYSTEM: 17,
  LIB_RM_VERSION_MISMATCH: 18,
  MEMORY: 20,
  NO_DATA: 21,
  ARGUMENT_VERSION_MISMATCH: 25,
  DEPRECATED: 26,
  UNKNOWN: 999,
} as const;

const RETURN_TEXT: Record<number, string> = {
  1: "NVML not initialized",
  2: "invalid argument",
  3: "not supported",
  4: "insufficient permissions",
  6: "not found",
  7: "insufficient size",
  9: "NVIDIA driver is not loaded",
  10: "timeout",
  12: "NVML shared library not found",
  13: "function not found",
  14: "GPU requires a reset",
  15: "GPU is lost",
  17: "operating system call failed",
  18: "driver/library version mismatch (driver upgraded but not reloaded; reboot or reload the kernel module)",
  20: "out of memory",
  21: "no data",
  25: "struct version mismatch",
  26: "deprecated",
  999: "unknown error",
};

/**
 * A return code as words, for notes when `nvmlErrorString` is missing.
 *
 * @example
 * ```ts
 * nvmlReturnText(9); // "NVIDIA driver is not loaded (NVML 9)"
 * ```
 */
export function nvmlReturnText(code: number): string {
  return `${RETURN_TEXT[code] ?? "error"} (NVML ${code})`;
}

/**
 * `NVML_STRUCT_VERSION(name, ver)`: the struct's size with the version in the top byte.
 *
 * @example
 * ```ts
 * nvmlStructVersion(40, 2); // 0x02000028, nvmlMemory_v2
 * ```
 */
export function nvmlStructVersion(size: number, version: number): number {
  return (size | (version << 24)) >>> 0;
}

/** Sizes and version words of the structs brim passes (nvml.h, LP64). @example Buffer.alloc(NVML_LAYOUT.memoryV1Size); */
export const NVML_LAYOUT = {
  memoryV1Size: 24,
  memoryV2Size: 40,
  memoryV2Version: 0x02000028,
  utilizationSize: 8,
  processStrides: [16, 24, 32] as const,
  processUtilizationSampleSize: 32,
  sampleSize: 16,
  gpmSupportSize: 8,
  gpmSupportVersion: 1,
  gpmMetricsGetVersion: 1,
  gpmMetricsOffset: 24,
  gpmMetricSize: 40,
  gpmMetricMax: 333,
  gpmMetricsGetSize: 24 + 333 * 40,
  eventDataSize: 32,
  uuidLength: 80,
  nameLength: 96,
  driverVersionLength: 80,
} as const;

/** `NVML_VALUE_NOT_AVAILABLE`: what the driver writes for a number it cannot give. @example readU64(out) === NVML_VALUE_NOT_AVAILABLE; */
export const NVML_VALUE_NOT_AVAILABLE = 0xffff_ffff_ffff_ffffn;

/** nvmlSamplingType_t values brim reads. @example api.nvmlDeviceGetSamples?.(device, NVML_SAMPLING.GPU_UTILIZATION, lastSeen, type, count, null); */
export const NVML_SAMPLING = { TOTAL_POWER: 0, GPU_UTILIZATION: 1, MEMORY_UTILIZATION: 2, PROCESSOR_CLOCK: 5, MEMORY_CLOCK: 6 } as const;

/** nvmlClockType_t values brim reads. @example api.nvmlDeviceGetClockInfo?.(device, NVML_CLOCK.SM, out); */
export const NVML_CLOCK = { GRAPHICS: 0, SM: 1, MEM: 2 } as const;

/** nvmlPcieUtilCounter_t. @example await api.nvmlDeviceGetPcieThroughput?.(device, NVML_PCIE.RX, out); */
export const NVML_PCIE = { TX: 0, RX: 1 } as const;

/** nvmlEventTypeXidCriticalError. @example api.nvmlDeviceRegisterEvents?.(device, NVML_EVENT_XID_CRITICAL, set); */
export const NVML_EVENT_XID_CRITICAL = 0x8;

/** The GPM metrics brim asks for (nvmlGpmMetricId_t). @example encodeGpmMetricsRequest(a, b, [GPM_METRIC.SM_UTIL]); */
export const GPM_METRIC = { SM_UTIL: 2, SM_OCCUPANCY: 3, ANY_TENSOR_UTIL: 5, DRAM_BW_UTIL: 10 } as const;

type Bytes = Uint8Array;

function view(bytes: Bytes): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function u64(data: DataView, offset: number): bigint {
  return data.getBigUint64(offset, true);
}

function bytesOrNull(value: bigint): number | null {
  return value === NVML_VALUE_NOT_AVAILABLE ? null : Number(value);
}

/**
 * Reads a NUL-terminated C string from a char buffer.
 *
 * @example
 * ```ts
 * readCString(Buffer.from("550.54.15\0garbage")); // "550.54.15"
 * ```
 */
export function readCString(bytes: Bytes): string {
  const end = bytes.indexOf(0);
  return Buffer.from(bytes.buffer, bytes.byteOffset, end === -1 ? bytes.byteLength : end).toString("utf8");
}

/** Reads an `unsigned int` out-parameter. @example readU32(Buffer.from([7, 0, 0, 0])); // 7 */
export function readU32(bytes: Bytes, offset = 0): number {
  return view(bytes).getUint32(offset, true);
}

/** Writes an `unsigned int` in-parameter. @example writeU32(count, 0); */
export function writeU32(bytes: Bytes, value: number, offset = 0): void {
  view(bytes).setUint32(offset, value, true);
}

/** Reads an `unsigned long long` out-parameter. @example readU64(energy); // 123456n */
export function readU64(bytes: Bytes, offset = 0): bigint {
  return u64(view(bytes), offset);
}

/**
 * Device memory in bytes. `usedBytes` from v1 includes what the driver reserves; from v2 it does not.
 *
 * @example
 * ```ts
 * const m: MemoryInfo = { totalBytes: 8e9, freeBytes: 6e9, usedBytes: 2e9, reservedBytes: null };
 * ```
 */
export interface MemoryInfo {
  totalBytes: number;
  freeBytes: number;
  usedBytes: number;
  reservedBytes: number | null;
}

/**
 * Decodes `nvmlMemory_t`: total @0, free @8, used @16.
 *
 * @example
 * ```ts
 * decodeMemoryV1(buffer).usedBytes;
 * ```
 */
export function decodeMemoryV1(bytes: Bytes): MemoryInfo {
  const data = view(bytes);
  return { totalBytes: Number(u64(data, 0)), freeBytes: Number(u64(data, 8)), usedBytes: Number(u64(data, 16)), reservedBytes: null };
}

/**
 * A zeroed `nvmlMemory_v2_t` with its version word set, ready to pass to `nvmlDeviceGetMemoryInfo_v2`.
 *
 * @example
 * ```ts
 * readU32(encodeMemoryV2Request()); // 0x02000028
 * ```
 */
export function encodeMemoryV2Request(): Buffer {
  const bytes = Buffer.alloc(NVML_LAYOUT.memoryV2Size);
  writeU32(bytes, NVML_LAYOUT.memoryV2Version);
  return bytes;
}

/**
 * Decodes `nvmlMemory_v2_t`: version @0, total @8, reserved @16, free @24, used @32.
 *
 * @example
 * ```ts
 * decodeMemoryV2(buffer).reservedBytes;
 * ```
 */
export function decodeMemoryV2(bytes: Bytes): MemoryInfo {
  const data = view(bytes);
  return { totalBytes: Number(u64(data, 8)), reservedBytes: Number(u64(data, 16)), freeBytes: Number(u64(data, 24)), usedBytes: Number(u64(data, 32)) };
}

/**
 * Decodes `nvmlUtilization_t`: gpu @0, memory @4 (percent).
 *
 * @example
 * ```ts
 * decodeUtilization(buffer); // { gpu: 97, memory: 40 }
 * ```
 */
export function decodeUtilization(bytes: Bytes): { gpu: number; memory: number } {
  const data = view(bytes);
  return { gpu: data.getUint32(0, true), memory: data.getUint32(4, true) };
}

/** The byte a process buffer is filled with before the driver writes into it. @example Buffer.alloc(capacity * 32, PROCESS_SENTINEL); */
export const PROCESS_SENTINEL = 0xa5;

/**
 * One entry of the running-process list: pid @0, usedGpuMemory @8 at every stride.
 *
 * @example
 * ```ts
 * const e: ProcessEntry = { pid: 4242, usedBytes: 1073741824 };
 * ```
 */
export interface ProcessEntry {
  pid: number;
  usedBytes: number | null;
}

/**
 * Decodes `count` process entries laid out `stride` bytes apart (16: v1, 24: v2, 32: the R535 "v3").
 *
 * @example
 * ```ts
 * decodeProcessEntries(buffer, 2, 24); // [{ pid: 10, usedBytes: … }, { pid: 11, usedBytes: … }]
 * ```
 */
export function decodeProcessEntries(bytes: Bytes, count: number, stride: number): ProcessEntry[] {
  const data = view(bytes);
  const entries: ProcessEntry[] = [];
  for (let i = 0; i < count && (i + 1) * stride <= bytes.byteLength; i++) {
    const at = i * stride;
    entries.push({ pid: data.getUint32(at, true), usedBytes: bytesOrNull(u64(data, at + 8)) });
  }
  return entries;
}

/**
 * Finds the stride the driver wrote `count` process entries at, in a buffer filled with
 * {@link PROCESS_SENTINEL} beforehand: the smallest of 16, 24 and 32 whose `count` entries cover
 * every byte the driver changed. Null when none fits (nothing written, or more than 32 bytes each).
 *
 * @example
 * ```ts
 * const buffer = Buffer.alloc(capacity * 32, PROCESS_SENTINEL);
 * // ... the driver writes `count` entries ...
 * detectProcessStride(buffer, count); // 24
 * ```
 */
export function detectProcessStride(bytes: Bytes, count: number): 16 | 24 | 32 | null {
  if (count <= 0) return null;
  let written = bytes.byteLength;
  while (written > 0 && bytes[written - 1] === PROCESS_SENTINEL) written--;
  if (written === 0) return null;
  for (const stride of NVML_LAYOUT.processStrides) {
    if (count * stride < written) continue;
    const entries = decodeProcessEntries(bytes, count, stride);
    return entries.length === count && entries.every((e) => e.pid > 0) ? stride : null;
  }
  return null;
}

/**
 * One per-process utilization sample (`nvmlProcessUtilizationSample_t`, 32 bytes).
 *
 * @example
 * ```ts
 * const s: ProcessUtilizationSample = { pid: 4242, timestampUs: 1763806500123456, smUtil: 80, memUtil: 30, encUtil: 0, decUtil: 0 };
 * ```
 */
export interface ProcessUtilizationSample {
  pid: number;
  timestampUs: number;
  smUtil: number;
  memUtil: number;
  encUtil: number;
  decUtil: number;
}

/**
 * Decodes `count` `nvmlProcessUtilizationSample_t`: pid @0, timeStamp @8, smUtil @16, memUtil @20, encUtil @24, decUtil @28.
 *
 * @example
 * ```ts
 * decodeProcessUtilizationSamples(buffer, count);
 * ```
 */
export function decodeProcessUtilizationSamples(bytes: Bytes, count: number): ProcessUtilizationSample[] {
  const data = view(bytes);
  const size = NVML_LAYOUT.processUtilizationSampleSize;
  const samples: ProcessUtilizationSample[] = [];
  for (let i = 0; i < count && (i + 1) * size <= bytes.byteLength; i++) {
    const at = i * size;
    samples.push({
      pid: data.getUint32(at, true),
      timestampUs: Number(u64(data, at + 8)),
      smUtil: data.getUint32(at + 16, true),
      memUtil: data.getUint32(at + 20, true),
      encUtil: data.getUint32(at + 24, true),
      decUtil: data.getUint32(at + 28, true),
    });
  }
  return samples;
}

/**
 * The latest sample per pid, leaving out values above 100 (the driver sometimes reports garbage there).
 *
 * @example
 * ```ts
 * latestProcessUtilization(samples).get(4242); // { smUtil: 80, memUtil: 30, timestampUs: … }
 * ```
 */
export function latestProcessUtilization(samples: readonly ProcessUtilizationSample[]): Map<number, { smUtil: number; memUtil: number; timestampUs: number }> {
  const latest = new Map<number, { smUtil: number; memUtil: number; timestampUs: number }>();
  for (const s of samples) {
    if (s.smUtil > 100 || s.memUtil > 100) continue;
    const seen = latest.get(s.pid);
    if (seen === undefined || s.timestampUs >= seen.timestampUs) latest.set(s.pid, { smUtil: s.smUtil, memUtil: s.memUtil, timestampUs: s.timestampUs });
  }
  return latest;
}

/**
 * Decodes `count` `nvmlSample_t` (timeStamp u64 @0, value union @8) of the given nvmlValueType_t.
 *
 * @example
 * ```ts
 * decodeSamples(buffer, 3, 1); // [{ timestampUs: …, value: 97 }, …] (1 = unsigned int)
 * ```
 */
export function decodeSamples(bytes: Bytes, count: number, valueType: number): { timestampUs: number; value: number }[] {
  const data = view(bytes);
  const size = NVML_LAYOUT.sampleSize;
  const samples: { timestampUs: number; value: number }[] = [];
  for (let i = 0; i < count && (i + 1) * size <= bytes.byteLength; i++) {
    const at = i * size;
    const value = decodeValue(data, at + 8, valueType);
    if (value !== null) samples.push({ timestampUs: Number(u64(data, at)), value });
  }
  return samples;
}

/**
 * Reads an `nvmlValue_t` union by its nvmlValueType_t (0 double, 1 uint, 2 ulong, 3 ulonglong, 4 longlong, 5 int, 6 ushort).
 *
 * @example
 * ```ts
 * decodeValue(new DataView(buffer.buffer), 8, 1);
 * ```
 */
export function decodeValue(data: DataView, offset: number, valueType: number): number | null {
  switch (valueType) {
    case 0:
      return data.getFloat64(offset, true);
    case 1:
      return data.getUint32(offset, true);
    case 2:
    case 3:
      return Number(data.getBigUint64(offset, true));
    case 4:
      return Number(data.getBigInt64(offset, true));
    case 5:
      return data.getInt32(offset, true);
    case 6:
      return data.getUint16(offset, true);
    default:
      return null;
  }
}

/**
 * A zeroed `nvmlGpmSupport_t` with its version set.
 *
 * @example
 * ```ts
 * const support = encodeGpmSupportRequest(); // pass to nvmlGpmQueryDeviceSupport, then readU32(support, 4)
 * ```
 */
export function encodeGpmSupportRequest(): Buffer {
  const bytes = Buffer.alloc(NVML_LAYOUT.gpmSupportSize);
  writeU32(bytes, NVML_LAYOUT.gpmSupportVersion);
  return bytes;
}

/**
 * An `nvmlGpmMetricsGet_t` asking for `metricIds` between two samples: version @0, numMetrics @4,
 * sample1 @8, sample2 @16, metrics[] @24 with metricId at the start of each 40-byte entry.
 *
 * @example
 * ```ts
 * const request = encodeGpmMetricsRequest(older, newer, [GPM_METRIC.SM_UTIL]);
 * ```
 */
export function encodeGpmMetricsRequest(sample1: bigint, sample2: bigint, metricIds: readonly number[]): Buffer {
  const bytes = Buffer.alloc(NVML_LAYOUT.gpmMetricsGetSize);
  const data = view(bytes);
  data.setUint32(0, NVML_LAYOUT.gpmMetricsGetVersion, true);
  data.setUint32(4, metricIds.length, true);
  data.setBigUint64(8, sample1, true);
  data.setBigUint64(16, sample2, true);
  metricIds.forEach((id, i) => data.setUint32(NVML_LAYOUT.gpmMetricsOffset + i * NVML_LAYOUT.gpmMetricSize, id, true));
  return bytes;
}

/**
 * Decodes the metrics of an `nvmlGpmMetricsGet_t` after the call: per entry metricId @0, nvmlReturn @4, value (double) @8.
 *
 * @example
 * ```ts
 * decodeGpmMetrics(request); // [{ metricId: 2, ret: 0, value: 63.5 }]
 * ```
 */
export function decodeGpmMetrics(bytes: Bytes): { metricId: number; ret: number; value: number }[] {
  const data = view(bytes);
  const count = Math.min(data.getUint32(4, true), NVML_LAYOUT.gpmMetricMax);
  const metrics: { metricId: number; ret: number; value: number }[] = [];
  for (let i = 0; i < count; i++) {
    const at = NVML_LAYOUT.gpmMetricsOffset + i * NVML_LAYOUT.gpmMetricSize;
    if (at + NVML_LAYOUT.gpmMetricSize > bytes.byteLength) break;
    metrics.push({ metricId: data.getUint32(at, true), ret: data.getUint32(at + 4, true), value: data.getFloat64(at + 8, true) });
  }
  return metrics;
}

/** Clock-event (throttle) reason bits and the names brim gives them. @example THROTTLE_REASONS.map(([, name]) => name); */
export const THROTTLE_REASONS: readonly (readonly [bit: bigint, name: string])[] = [
  [0x1n, "gpu_idle"],
  [0x2n, "applications_clocks"],
  [0x4n, "sw_power_cap"],
  [0x8n, "hw_slowdown"],
  [0x10n, "sync_boost"],
  [0x20n, "sw_thermal"],
  [0x40n, "hw_thermal"],
  [0x80n, "hw_power_brake"],
  [0x100n, "display_clocks"],
];

/**
 * Names the bits of a clock-event reasons mask; bits brim does not know come out as `bit_0x…`.
 *
 * @example
 * ```ts
 * decodeThrottleReasons(0x44n); // ["sw_power_cap", "hw_thermal"]
 * decodeThrottleReasons(0n);    // []
 * ```
 */
export function decodeThrottleReasons(mask: bigint): string[] {
  const names: string[] = [];
  let rest = mask;
  for (const [bit, name] of THROTTLE_REASONS) {
    if ((mask & bit) !== 0n) names.push(name);
    rest &= ~bit;
  }
  for (let bit = 1n; rest !== 0n; bit <<= 1n) {
    if ((rest & bit) !== 0n) {
      names.push(`bit_0x${bit.toString(16)}`);
      rest &= ~bit;
    }
  }
  return names;
}

/**
 * Decodes `nvmlEventData_t`: device @0, eventType @8, eventData @16 (the Xid), gpuInstanceId @24, computeInstanceId @28.
 *
 * @example
 * ```ts
 * decodeEventData(buffer); // { device: 0x55d0n, eventType: 8, xid: 79 }
 * ```
 */
export function decodeEventData(bytes: Bytes): { device: bigint; eventType: number; xid: number } {
  const data = view(bytes);
  return { device: u64(data, 0), eventType: Number(u64(data, 8)), xid: Number(u64(data, 16)) };
}
