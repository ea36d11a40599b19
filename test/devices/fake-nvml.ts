// A fake NVML driver for tests: writes the bytes nvml.h lays out into the caller's buffers.
import type { NvmlApi } from "../../src/devices/nvml-api.ts";
import { readU32, writeU32 } from "../../src/devices/nvml-structs.ts";

export interface FakeProcess {
  pid: number;
  usedBytes: bigint;
}

export interface FakeGpu {
  name: string;
  uuid: string;
  total: bigint;
  reserved: bigint;
  used: bigint;
  processes: FakeProcess[];
  /** The stride the fake driver writes process entries at. */
  stride: 16 | 24 | 32;
  util: [gpu: number, memory: number];
  /** Process utilization samples: [pid, timestampUs, smUtil, memUtil]. */
  processSamples: [number, number, number, number][];
  /** Utilization buffer samples: [timestampUs, value]. */
  utilSamples: [number, number][];
  powerMw: number;
  limitMw: number;
  energyMj: bigint;
  smClock: number;
  memClock: number;
  reasons: bigint;
  pcie: [tx: number, rx: number];
  gpm: boolean;
}

export function fakeGpu(overrides: Partial<FakeGpu> = {}): FakeGpu {
  return {
    name: "NVIDIA H100 80GB HBM3",
    uuid: "GPU-11111111-2222-3333-4444-555555555555",
    total: 85_520_809_984n,
    reserved: 500_000_000n,
    used: 2_000_000_000n,
    processes: [],
    stride: 24,
    util: [97, 40],
    processSamples: [],
    utilSamples: [],
    powerMw: 350_000,
    limitMw: 700_000,
    energyMj: 123_456_789n,
    smClock: 1980,
    memClock: 2619,
    reasons: 0n,
    pcie: [1000, 2000],
    gpm: true,
    ...overrides,
  };
}

export interface FakeDriver {
  api: NvmlApi;
  gpus: FakeGpu[];
  /** Every call made, by name, with the arguments that matter for the test. */
  calls: { name: string; args: unknown[] }[];
  /** Xid events waiting to be read: [gpu index, xid]. */
  xidQueue: [number, number][];
  callsTo(name: string): { name: string; args: unknown[] }[];
}

const HANDLE_BASE = 0x5000n;

export function fakeNvml(gpus: FakeGpu[], overrides: Partial<Record<keyof NvmlApi, unknown>> = {}): FakeDriver {
  const calls: { name: string; args: unknown[] }[] = [];
  const xidQueue: [number, number][] = [];
  const gpuOf = (device: bigint): FakeGpu => {
    const gpu = gpus[Number(device - HANDLE_BASE)];
    if (gpu === undefined) throw new Error(`fake NVML: bad handle ${device}`);
    return gpu;
  };
  const text = (out: Buffer, value: string): number => {
    out.fill(0);
    out.write(value, "utf8");
    return 0;
  };
  const gpmSamples = new Map<bigint, { device: bigint; seq: number }>();
  let nextSample = 0x9000n;
  let sampleSeq = 0;
  const processes = (device: bigint, count: Buffer, infos: Buffer | null): number => {
    const gpu = gpuOf(device);
    const n = gpu.processes.length;
    if (infos === null || readU32(count) < n) {
      writeU32(count, n);
      return n === 0 ? 0 : 7;
    }
    gpu.processes.forEach((p, i) => {
      const at = i * gpu.stride;
      infos.writeUInt32LE(p.pid, at);
      infos.writeUInt32LE(0, at + 4);
      infos.writeBigUInt64LE(p.usedBytes, at + 8);
      if (gpu.stride >= 24) {
        infos.writeUInt32LE(0xffffffff, at + 16);
        infos.writeUInt32LE(0xffffffff, at + 20);
      }
      if (gpu.stride === 32) infos.writeBigUInt64LE(0n, at + 24);
    });
    writeU32(count, n);
    return 0;
  };
  const base: NvmlApi = {
    library: "fake",
    nvmlInit_v2: () => 0,
    nvmlShutdown: () => 0,
    nvmlErrorString: (code) => `fake error ${code}`,
    nvmlSystemGetDriverVersion: (out) => text(out, "550.54.15"),
    nvmlSystemGetCudaDriverVersion_v2: (out) => (writeU32(out, 12040), 0),
    nvmlDeviceGetCount_v2: (out) => (writeU32(out, gpus.length), 0),
    nvmlDeviceGetHandleByIndex_v2: (index, out) => (out.writeBigUInt64LE(HANDLE_BASE + BigInt(index)), 0),
    nvmlDeviceGetName: (device, out) => text(out, gpuOf(device).name),
    nvmlDeviceGetUUID: (device, out) => text(out, gpuOf(device).uuid),
    nvmlDeviceGetCudaComputeCapability: (_device, major, minor) => (writeU32(major, 9), writeU32(minor, 0), 0),
    nvmlDeviceGetMemoryInfo: (device, out) => {
      const g = gpuOf(device);
      out.writeBigUInt64LE(g.total, 0);
      out.writeBigUInt64LE(g.total - g.used - g.reserved, 8);
      out.writeBigUInt64LE(g.used + g.reserved, 16);
      return 0;
    },
    nvmlDeviceGetMemoryInfo_v2: (device, out) => {
      if (readU32(out) !== 0x02000028) return 25;
      const g = gpuOf(device);
      out.writeBigUInt64LE(g.total, 8);
      out.writeBigUInt64LE(g.reserved, 16);
      out.writeBigUInt64LE(g.total - g.used - g.reserved, 24);
      out.writeBigUInt64LE(g.used, 32);
      return 0;
    },
    nvmlDeviceGetUtilizationRates: (device, out) => {
      const [gpu, memory] = gpuOf(device).util;
      writeU32(out, gpu, 0);
      writeU32(out, memory, 4);
      return 0;
    },
    nvmlDeviceGetSamples: (device, type, lastSeen, valueType, count, samples) => {
      calls.push({ name: "nvmlDeviceGetSamples", args: [type, lastSeen, samples === null] });
      const fresh = gpuOf(device).utilSamples.filter(([t]) => t > lastSeen);
      if (fresh.length === 0) return 6;
      writeU32(valueType, 1);
      if (samples === null) {
        writeU32(count, fresh.length);
        return 0;
      }
      const n = Math.min(readU32(count), fresh.length);
      fresh.slice(0, n).forEach(([t, value], i) => {
        samples.writeBigUInt64LE(BigInt(t), i * 16);
        samples.writeUInt32LE(value, i * 16 + 8);
      });
      writeU32(count, n);
      return 0;
    },
    nvmlDeviceGetComputeRunningProcesses_v3: (device, count, infos) => {
      calls.push({ name: "nvmlDeviceGetComputeRunningProcesses_v3", args: [readU32(count), infos === null ? null : infos.byteLength] });
      return processes(device, count, infos);
    },
    nvmlDeviceGetProcessUtilization: (device, samples, count, lastSeen) => {
      calls.push({ name: "nvmlDeviceGetProcessUtilization", args: [lastSeen, samples === null] });
      const fresh = gpuOf(device).processSamples.filter(([, t]) => t > lastSeen);
      if (fresh.length === 0) return 6;
      if (samples === null || readU32(count) < fresh.length) {
        writeU32(count, fresh.length);
        return 7;
      }
      fresh.forEach(([pid, t, sm, mem], i) => {
        const at = i * 32;
        samples.writeUInt32LE(pid, at);
        samples.writeBigUInt64LE(BigInt(t), at + 8);
        samples.writeUInt32LE(sm, at + 16);
        samples.writeUInt32LE(mem, at + 20);
      });
      writeU32(count, fresh.length);
      return 0;
    },
    nvmlDeviceGetPowerUsage: (device, out) => (writeU32(out, gpuOf(device).powerMw), 0),
    nvmlDeviceGetEnforcedPowerLimit: (device, out) => (writeU32(out, gpuOf(device).limitMw), 0),
    nvmlDeviceGetTotalEnergyConsumption: (device, out) => (out.writeBigUInt64LE(gpuOf(device).energyMj), 0),
    nvmlDeviceGetClockInfo: (device, type, out) => (writeU32(out, type === 1 ? gpuOf(device).smClock : gpuOf(device).memClock), 0),
    nvmlDeviceGetCurrentClocksEventReasons: (device, out) => (out.writeBigUInt64LE(gpuOf(device).reasons), 0),
    nvmlDeviceGetPcieThroughput: (device, counter, out) => {
      writeU32(out, gpuOf(device).pcie[counter] ?? 0);
      return Promise.resolve(0);
    },
    nvmlGpmQueryDeviceSupport: (device, out) => {
      if (readU32(out) !== 1) return 25;
      writeU32(out, gpuOf(device).gpm ? 1 : 0, 4);
      return 0;
    },
    nvmlGpmSampleAlloc: (out) => {
      const handle = nextSample++;
      gpmSamples.set(handle, { device: -1n, seq: -1 });
      out.writeBigUInt64LE(handle);
      return 0;
    },
    nvmlGpmSampleFree: (sample) => (gpmSamples.delete(sample) ? 0 : 2),
    nvmlGpmSampleGet: (device, sample) => {
      const state = gpmSamples.get(sample);
      if (state === undefined) return 2;
      state.device = device;
      state.seq = sampleSeq++;
      return 0;
    },
    nvmlGpmMetricsGet: (metrics) => {
      calls.push({ name: "nvmlGpmMetricsGet", args: [] });
      if (metrics.readUInt32LE(0) !== 1) return 25;
      const first = gpmSamples.get(metrics.readBigUInt64LE(8));
      const second = gpmSamples.get(metrics.readBigUInt64LE(16));
      if (first === undefined || second === undefined || first.seq < 0 || second.seq <= first.seq) return 2;
      const n = metrics.readUInt32LE(4);
      for (let i = 0; i < n; i++) {
        const at = 24 + i * 40;
        const id = metrics.readUInt32LE(at);
        metrics.writeUInt32LE(0, at + 4);
        metrics.writeDoubleLE(id * 10 + 0.5, at + 8);
      }
      return 0;
    },
    nvmlEventSetCreate: (out) => (out.writeBigUInt64LE(0x7777n), 0),
    nvmlDeviceRegisterEvents: () => 0,
    nvmlEventSetWait_v2: (_set, data) => {
      const next = xidQueue.shift();
      if (next === undefined) return 10;
      data.writeBigUInt64LE(HANDLE_BASE + BigInt(next[0]), 0);
      data.writeBigUInt64LE(8n, 8);
      data.writeBigUInt64LE(BigInt(next[1]), 16);
      return 0;
    },
    nvmlEventSetFree: () => 0,
  };
  const api = { ...base } as Record<string, unknown>;
  for (const [name, value] of Object.entries(overrides)) {
    if (value === undefined) delete api[name];
    else api[name] = value;
  }
  return { api: api as unknown as NvmlApi, gpus, calls, xidQueue, callsTo: (name) => calls.filter((c) => c.name === name) };
}

/** Only the four calls NVML cannot do without, plus v1 memory. */
export function bareNvml(gpu: FakeGpu): NvmlApi {
  const full = fakeNvml([gpu]).api;
  return {
    library: "bare",
    nvmlInit_v2: full.nvmlInit_v2,
    nvmlShutdown: full.nvmlShutdown,
    nvmlDeviceGetCount_v2: full.nvmlDeviceGetCount_v2,
    nvmlDeviceGetHandleByIndex_v2: full.nvmlDeviceGetHandleByIndex_v2,
    nvmlDeviceGetMemoryInfo: full.nvmlDeviceGetMemoryInfo,
  };
}
