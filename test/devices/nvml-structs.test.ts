import { describe, expect, it } from "vitest";
import {
  GPM_METRIC,
  NVML_LAYOUT,
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
  nvmlStructVersion,
  readCString,
} from "../../src/devices/nvml-structs.ts";

// Buffers built field by field with DataView at nvml.h's LP64 offsets, as the driver would write them.
function bytes(size: number, fill = 0): { buffer: Buffer; data: DataView } {
  const buffer = Buffer.alloc(size, fill);
  return { buffer, data: new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength) };
}

/** Writes process entries like a driver using `stride`-byte structs (v1 16, v2 24, R535 "v3" 32). */
function driverWritesProcesses(stride: 16 | 24 | 32, entries: [pid: number, used: bigint][], capacity: number): Buffer {
  const { buffer, data } = bytes(capacity * 32, PROCESS_SENTINEL);
  entries.forEach(([pid, used], i) => {
    const at = i * stride;
    data.setUint32(at, pid, true);
    // Padding after pid (4..8) is left as the driver found it.
    data.setBigUint64(at + 8, used, true);
    if (stride >= 24) {
      data.setUint32(at + 16, 0xffffffff, true); // gpuInstanceId: no MIG
      data.setUint32(at + 20, 0xffffffff, true); // computeInstanceId
    }
    if (stride === 32) data.setBigUint64(at + 24, 0n, true); // usedGpuCcProtectedMemory
  });
  return buffer;
}

describe("NVML struct layouts", () => {
  it("builds version words as NVML_STRUCT_VERSION does", () => {
    expect(nvmlStructVersion(40, 2)).toBe(0x02000028);
    expect(NVML_LAYOUT.memoryV2Version).toBe(nvmlStructVersion(NVML_LAYOUT.memoryV2Size, 2));
    expect(nvmlStructVersion(24, 1)).toBe(0x01000018);
    expect(NVML_LAYOUT.gpmMetricsGetSize).toBe(13344);
  });

  it("decodes nvmlMemory_t (v1): total @0, free @8, used @16", () => {
    const { buffer, data } = bytes(24);
    data.setBigUint64(0, 8_589_934_592n, true);
    data.setBigUint64(8, 6_442_450_944n, true);
    data.setBigUint64(16, 2_147_483_648n, true);
    expect(decodeMemoryV1(buffer)).toEqual({ totalBytes: 8_589_934_592, freeBytes: 6_442_450_944, usedBytes: 2_147_483_648, reservedBytes: null });
  });

  it("encodes the v2 request with version 0x02000028 and decodes nvmlMemory_v2_t", () => {
    const request = encodeMemoryV2Request();
    expect(request.byteLength).toBe(40);
    expect(request.readUInt32LE(0)).toBe(0x02000028);
    const { buffer, data } = bytes(40);
    data.setUint32(0, 0x02000028, true);
    data.setUint32(4, 0xdeadbeef, true); // padding: ignored
    data.setBigUint64(8, 85_520_809_984n, true);
    data.setBigUint64(16, 912_000_000n, true);
    data.setBigUint64(24, 80_000_000_000n, true);
    data.setBigUint64(32, 4_608_809_984n, true);
    expect(decodeMemoryV2(buffer)).toEqual({ totalBytes: 85_520_809_984, reservedBytes: 912_000_000, freeBytes: 80_000_000_000, usedBytes: 4_608_809_984 });
  });

  it("decodes nvmlUtilization_t", () => {
    const { buffer, data } = bytes(8);
    data.setUint32(0, 97, true);
    data.setUint32(4, 41, true);
    expect(decodeUtilization(buffer)).toEqual({ gpu: 97, memory: 41 });
  });

  it.each([16, 24, 32] as const)("decodes process entries written at stride %i, and detects that stride", (stride) => {
    const entries: [number, bigint][] = [
      [4242, 1_073_741_824n],
      [4243, 536_870_912n],
      [99_999, 0xffff_ffff_ffff_ffffn],
    ];
    const buffer = driverWritesProcesses(stride, entries, 3 * 2 + 5);
    expect(detectProcessStride(buffer, 3)).toBe(stride);
    expect(decodeProcessEntries(buffer, 3, stride)).toEqual([
      { pid: 4242, usedBytes: 1_073_741_824 },
      { pid: 4243, usedBytes: 536_870_912 },
      { pid: 99_999, usedBytes: null },
    ]);
  });

  it("detects the stride with a single entry, and reads garbage at the wrong one", () => {
    for (const stride of [16, 24, 32] as const) expect(detectProcessStride(driverWritesProcesses(stride, [[7, 1000n]], 7), 1)).toBe(stride);
    const written16 = driverWritesProcesses(
      16,
      [
        [10, 100n],
        [11, 200n],
      ],
      9,
    );
    expect(decodeProcessEntries(written16, 2, 24)[1]?.pid).not.toBe(11);
  });

  it("gives no stride when nothing was written or more than 32 bytes per entry", () => {
    expect(detectProcessStride(Buffer.alloc(320, PROCESS_SENTINEL), 2)).toBeNull();
    expect(detectProcessStride(Buffer.alloc(320, 0), 2)).toBeNull();
    expect(detectProcessStride(Buffer.alloc(320, PROCESS_SENTINEL), 0)).toBeNull();
  });

  it("decodes nvmlProcessUtilizationSample_t and keeps the latest plausible sample per pid", () => {
    const { buffer, data } = bytes(4 * 32);
    const rows: [number, bigint, number, number][] = [
      [10, 1_000_000n, 50, 20],
      [10, 1_200_000n, 80, 30],
      [11, 1_100_000n, 4_294_967_295, 5], // garbage the driver sometimes reports
      [11, 1_050_000n, 12, 3],
    ];
    rows.forEach(([pid, t, sm, mem], i) => {
      const at = i * 32;
      data.setUint32(at, pid, true);
      data.setBigUint64(at + 8, t, true);
      data.setUint32(at + 16, sm, true);
      data.setUint32(at + 20, mem, true);
      data.setUint32(at + 24, 1, true);
      data.setUint32(at + 28, 2, true);
    });
    const samples = decodeProcessUtilizationSamples(buffer, 4);
    expect(samples[0]).toEqual({ pid: 10, timestampUs: 1_000_000, smUtil: 50, memUtil: 20, encUtil: 1, decUtil: 2 });
    const latest = latestProcessUtilization(samples);
    expect(latest.get(10)).toEqual({ smUtil: 80, memUtil: 30, timestampUs: 1_200_000 });
    expect(latest.get(11)).toEqual({ smUtil: 12, memUtil: 3, timestampUs: 1_050_000 });
  });

  it("decodes nvmlSample_t arrays by value type", () => {
    const { buffer, data } = bytes(3 * 16);
    data.setBigUint64(0, 1_763_806_500_000_000n, true);
    data.setUint32(8, 97, true);
    data.setBigUint64(16, 1_763_806_500_166_000n, true);
    data.setUint32(24, 12, true);
    expect(decodeSamples(buffer, 2, 1)).toEqual([
      { timestampUs: 1_763_806_500_000_000, value: 97 },
      { timestampUs: 1_763_806_500_166_000, value: 12 },
    ]);
    data.setFloat64(40, 123.25, true);
    expect(decodeSamples(buffer.subarray(32), 1, 0)[0]?.value).toBe(123.25);
    data.setBigUint64(40, 5_000_000_000n, true);
    expect(decodeSamples(buffer.subarray(32), 1, 3)[0]?.value).toBe(5_000_000_000);
    expect(decodeSamples(buffer, 3, 99)).toEqual([]);
  });

  it("encodes a GPM metrics request and decodes the driver's answers", () => {
    const request = encodeGpmMetricsRequest(0x1111n, 0x2222n, [
      GPM_METRIC.SM_UTIL,
      GPM_METRIC.SM_OCCUPANCY,
      GPM_METRIC.ANY_TENSOR_UTIL,
      GPM_METRIC.DRAM_BW_UTIL,
    ]);
    const data = new DataView(request.buffer, request.byteOffset, request.byteLength);
    expect(request.byteLength).toBe(13344);
    expect(data.getUint32(0, true)).toBe(1);
    expect(data.getUint32(4, true)).toBe(4);
    expect(data.getBigUint64(8, true)).toBe(0x1111n);
    expect(data.getBigUint64(16, true)).toBe(0x2222n);
    expect([0, 1, 2, 3].map((i) => data.getUint32(24 + i * 40, true))).toEqual([2, 3, 5, 10]);
    data.setFloat64(24 + 8, 63.5, true);
    data.setUint32(24 + 40 + 4, 3, true); // SM_OCCUPANCY: NOT_SUPPORTED
    data.setFloat64(24 + 80 + 8, 12.25, true);
    expect(decodeGpmMetrics(request).slice(0, 3)).toEqual([
      { metricId: 2, ret: 0, value: 63.5 },
      { metricId: 3, ret: 3, value: 0 },
      { metricId: 5, ret: 0, value: 12.25 },
    ]);
  });

  it("encodes nvmlGpmSupport_t with its version", () => {
    const support = encodeGpmSupportRequest();
    expect([support.byteLength, support.readUInt32LE(0), support.readUInt32LE(4)]).toEqual([8, 1, 0]);
  });

  it("names throttle (clock-event) reasons, unknown bits included", () => {
    expect(decodeThrottleReasons(0n)).toEqual([]);
    expect(decodeThrottleReasons(0x1n)).toEqual(["gpu_idle"]);
    expect(decodeThrottleReasons(0x44n)).toEqual(["sw_power_cap", "hw_thermal"]);
    expect(decodeThrottleReasons(0x8n | 0x20n | 0x80n)).toEqual(["hw_slowdown", "sw_thermal", "hw_power_brake"]);
    expect(decodeThrottleReasons(0x4n | 0x1000n)).toEqual(["sw_power_cap", "bit_0x1000"]);
  });

  it("decodes nvmlEventData_t and C strings", () => {
    const { buffer, data } = bytes(32);
    data.setBigUint64(0, 0x5000n, true);
    data.setBigUint64(8, 8n, true);
    data.setBigUint64(16, 79n, true);
    expect(decodeEventData(buffer)).toEqual({ device: 0x5000n, eventType: 8, xid: 79 });
    expect(readCString(Buffer.from("550.54.15\0junk"))).toBe("550.54.15");
    expect(readCString(Buffer.from("no-terminator"))).toBe("no-terminator");
    expect(nvmlReturnText(18)).toMatch(/version mismatch/);
  });
});
