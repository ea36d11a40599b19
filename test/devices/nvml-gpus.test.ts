import { describe, expect, it } from "vitest";
import { openNvmlGpus, type NvmlGpus } from "../../src/devices/nvml-gpus.ts";
import type { NvmlApi } from "../../src/devices/nvml-api.ts";
import { bareNvml, fakeGpu, fakeNvml } from "./fake-nvml.ts";

function open(api: NvmlApi, nowMs?: () => number): NvmlGpus {
  const opened = openNvmlGpus(api, nowMs === undefined ? {} : { nowMs });
  if ("error" in opened) throw new Error(opened.error);
  return opened.gpus;
}

async function readOne(gpus: NvmlGpus) {
  const [reading] = await gpus.read();
  if (reading === undefined) throw new Error("no reading");
  return reading;
}

describe("NVML GPUs through a fake driver", () => {
  it("finds the GPUs and reads every number, with v2 memory leaving reserved memory out of used", async () => {
    const driver = fakeNvml([fakeGpu({ reasons: 0x44n }), fakeGpu({ name: "NVIDIA A100-SXM4-40GB", uuid: "GPU-2", total: 42_949_672_960n })]);
    const gpus = open(driver.api);
    expect(gpus.driver).toBe("550.54.15");
    expect(gpus.cuda).toBe("12.4");
    expect(gpus.gpus.map((g) => [g.index, g.name, g.uuid, g.totalBytes, g.computeCapability])).toEqual([
      [0, "NVIDIA H100 80GB HBM3", "GPU-11111111-2222-3333-4444-555555555555", 85_520_809_984, "9.0"],
      [1, "NVIDIA A100-SXM4-40GB", "GPU-2", 42_949_672_960, "9.0"],
    ]);
    const [first] = await gpus.read();
    expect(first).toMatchObject({
      index: 0,
      usedBytes: 2_000_000_000,
      reservedBytes: 500_000_000,
      totalBytes: 85_520_809_984,
      util: 97,
      memUtil: 40,
      powerW: 350,
      powerLimitW: 700,
      energyJ: 123_456.789,
      smClockMHz: 1980,
      memClockMHz: 2619,
      throttle: ["sw_power_cap", "hw_thermal"],
      pcieTxKBs: 1000,
      pcieRxKBs: 2000,
      processes: [],
      xids: [],
      lost: false,
    });
    expect(gpus.gpus[0]?.available).toEqual([
      "util",
      "util_samples",
      "processes",
      "power",
      "power_limit",
      "energy",
      "clocks",
      "throttle",
      "pcie",
      "gpm",
      "xid_events",
    ]);
    gpus.close();
  });

  it.each([16, 24, 32] as const)("lists processes written at stride %i through the count protocol", async (stride) => {
    const processes = [
      { pid: 4242, usedBytes: 3n * 2n ** 30n },
      { pid: 4243, usedBytes: 2n ** 29n },
      { pid: 4244, usedBytes: 0xffff_ffff_ffff_ffffn },
    ];
    const driver = fakeNvml([fakeGpu({ processes, stride })]);
    const gpus = open(driver.api);
    driver.calls.length = 0;
    const reading = await readOne(gpus);
    expect(reading.processes.map((p) => [p.pid, p.usedBytes])).toEqual([
      [4242, 3 * 2 ** 30],
      [4243, 2 ** 29],
      [4244, null],
    ]);
    // Asked with count 0 and no buffer, told INSUFFICIENT_SIZE and 3, then asked again with 3*2+5 entries of 32 bytes.
    expect(driver.callsTo("nvmlDeviceGetComputeRunningProcesses_v3").map((c) => c.args)).toEqual([
      [0, null],
      [11, 11 * 32],
    ]);
  });

  it("answers an empty process list from the first call", async () => {
    const driver = fakeNvml([fakeGpu()]);
    const gpus = open(driver.api);
    driver.calls.length = 0;
    expect((await readOne(gpus)).processes).toEqual([]);
    expect(driver.callsTo("nvmlDeviceGetComputeRunningProcesses_v3")).toHaveLength(1);
  });

  it("retries when processes appear between the count and the list", async () => {
    const gpu = fakeGpu({ processes: [{ pid: 1, usedBytes: 1n }] });
    let grow = true;
    const driver = fakeNvml([gpu]);
    const inner = driver.api.nvmlDeviceGetComputeRunningProcesses_v3;
    const api: NvmlApi = {
      ...driver.api,
      nvmlDeviceGetComputeRunningProcesses_v3: (device, count, infos) => {
        if (infos !== null && grow) {
          grow = false;
          gpu.processes = Array.from({ length: 20 }, (_, i) => ({ pid: 100 + i, usedBytes: 1n }));
        }
        return inner?.(device, count, infos) ?? 13;
      },
    };
    const reading = await readOne(open(api));
    expect(reading.processes).toHaveLength(20);
  });

  it("turns missing symbols into nulls: only init, count, handles and v1 memory", async () => {
    const gpus = open(bareNvml(fakeGpu()));
    expect(gpus.driver).toBeNull();
    expect(gpus.cuda).toBeNull();
    expect(gpus.gpus[0]).toMatchObject({ name: "NVIDIA GPU", uuid: null, computeCapability: null, available: [] });
    const reading = await readOne(gpus);
    // v1 memory: used includes what the driver reserves.
    expect(reading).toMatchObject({ usedBytes: 2_500_000_000, reservedBytes: null, totalBytes: 85_520_809_984 });
    for (const key of [
      "util",
      "memUtil",
      "utilSamples",
      "smActivity",
      "smOccupancy",
      "tensorActivity",
      "dramBandwidth",
      "powerW",
      "powerLimitW",
      "energyJ",
      "smClockMHz",
      "memClockMHz",
      "throttle",
      "pcieTxKBs",
      "pcieRxKBs",
    ] as const) {
      expect(reading[key], key).toBeNull();
    }
    expect(reading.processes).toEqual([]);
    expect(reading.lost).toBe(false);
  });

  it("turns NOT_SUPPORTED into null and stops asking", async () => {
    let powerCalls = 0;
    const driver = fakeNvml([fakeGpu()], {
      nvmlDeviceGetPowerUsage: () => (powerCalls++, 3),
      nvmlDeviceGetUtilizationRates: () => 3,
      nvmlDeviceGetCurrentClocksEventReasons: () => 3,
      nvmlDeviceGetCurrentClocksThrottleReasons: () => 4,
      nvmlDeviceGetPcieThroughput: () => Promise.resolve(3),
    });
    const gpus = open(driver.api);
    const reading = await readOne(gpus);
    await gpus.read();
    expect([reading.powerW, reading.util, reading.throttle, reading.pcieTxKBs, reading.pcieRxKBs]).toEqual([null, null, null, null, null]);
    expect(reading.energyJ).not.toBeNull();
    expect(powerCalls).toBe(1);
    expect(gpus.gpus[0]?.available).not.toContain("power");
    expect(gpus.gpus[0]?.available).not.toContain("pcie");
  });

  it("falls back to the deprecated throttle-reasons call and to v1 memory on a version mismatch", async () => {
    const driver = fakeNvml([fakeGpu()], {
      nvmlDeviceGetCurrentClocksEventReasons: undefined,
      nvmlDeviceGetCurrentClocksThrottleReasons: (_d: bigint, out: Buffer) => (out.writeBigUInt64LE(0x4n), 0),
      nvmlDeviceGetMemoryInfo_v2: () => 25,
    });
    const reading = await readOne(open(driver.api));
    expect(reading.throttle).toEqual(["sw_power_cap"]);
    expect(reading.reservedBytes).toBeNull();
    expect(reading.usedBytes).toBe(2_500_000_000);
  });

  it("flags a lost GPU (GPU_IS_LOST) and keeps the flag", async () => {
    let lost = false;
    const driver = fakeNvml([fakeGpu()]);
    const inner = driver.api.nvmlDeviceGetUtilizationRates;
    const gpus = open({ ...driver.api, nvmlDeviceGetUtilizationRates: (d, out) => (lost ? 15 : (inner?.(d, out) ?? 13)) });
    expect((await readOne(gpus)).lost).toBe(false);
    lost = true;
    const reading = await readOne(gpus);
    expect(reading.lost).toBe(true);
    expect(reading.util).toBeNull();
    lost = false;
    expect((await readOne(gpus)).lost).toBe(true);
  });

  it("reports Xid events, and a fatal Xid marks the GPU lost", async () => {
    const driver = fakeNvml([fakeGpu(), fakeGpu({ uuid: "GPU-2" })]);
    const gpus = open(driver.api);
    driver.xidQueue.push([1, 13], [1, 79]);
    const [a, b] = await gpus.read();
    expect(a).toMatchObject({ xids: [], lost: false });
    expect(b).toMatchObject({ xids: [13, 79], lost: true });
    expect((await gpus.read())[1]?.xids).toEqual([]);
  });

  it("carries lastSeenTimeStamp through the per-process utilization samples and drops values above 100", async () => {
    let now = 1_763_806_500_000;
    const gpu = fakeGpu({
      processes: [
        { pid: 10, usedBytes: 1n },
        { pid: 11, usedBytes: 1n },
      ],
      processSamples: [
        [10, now * 1000 - 500_000, 40, 10],
        [10, now * 1000 - 100_000, 60, 20],
        [11, now * 1000 - 100_000, 250, 5],
      ],
    });
    const driver = fakeNvml([gpu]);
    const gpus = open(driver.api, () => now);
    const first = await readOne(gpus);
    expect(first.processes.map((p) => [p.pid, p.smUtil, p.memUtil])).toEqual([
      [10, 60, 20],
      [11, null, null],
    ]);
    const lastSeen = driver.callsTo("nvmlDeviceGetProcessUtilization").map((c) => c.args[0]);
    expect(lastSeen[0]).toBe((now - 1000) * 1000);
    now += 100;
    await gpus.read();
    const after = driver.callsTo("nvmlDeviceGetProcessUtilization").map((c) => c.args[0]);
    expect(after.at(-1)).toBe(now * 1000 - 100 * 1000 - 100_000);
    // No new samples: the latest value is kept for a while, then expires.
    now += 1000;
    expect((await readOne(gpus)).processes[0]?.smUtil).toBe(60);
    now += 5000;
    expect((await readOne(gpus)).processes[0]?.smUtil).toBeNull();
  });

  it("reads the driver's utilization sample buffer once per sample", async () => {
    let now = 1_763_806_500_000;
    const gpu = fakeGpu({
      utilSamples: [
        [(now - 400) * 1000, 30],
        [(now - 200) * 1000, 90],
      ],
    });
    const driver = fakeNvml([gpu]);
    const gpus = open(driver.api, () => now);
    // The probe at open took the first samples; later reads see only newer ones.
    expect((await readOne(gpus)).utilSamples).toEqual([]);
    gpu.utilSamples.push([(now + 50) * 1000, 75]);
    now += 100;
    expect((await readOne(gpus)).utilSamples).toEqual([{ t: (now - 50) / 1000, value: 75 }]);
    expect((await readOne(gpus)).utilSamples).toEqual([]);
    expect(gpus.gpus[0]?.available).toContain("util_samples");
  });

  it("reads GPM metrics from two samples at least 100 ms apart", async () => {
    let now = 1_000_000;
    const driver = fakeNvml([fakeGpu()]);
    const gpus = open(driver.api, () => now);
    // open() took the first sample; 50 ms later is too soon for a second.
    now += 50;
    expect((await readOne(gpus)).smActivity).toBeNull();
    expect(driver.callsTo("nvmlGpmMetricsGet")).toHaveLength(0);
    now += 60;
    const reading = await readOne(gpus);
    expect([reading.smActivity, reading.smOccupancy, reading.tensorActivity, reading.dramBandwidth]).toEqual([20.5, 30.5, 50.5, 100.5]);
    now += 10;
    expect((await readOne(gpus)).smActivity).toBe(20.5);
    expect(driver.callsTo("nvmlGpmMetricsGet")).toHaveLength(1);
  });

  it("leaves GPM out on a GPU that does not support it", async () => {
    const driver = fakeNvml([fakeGpu({ gpm: false })]);
    const gpus = open(driver.api);
    expect((await readOne(gpus)).smActivity).toBeNull();
    expect(gpus.gpus[0]?.available).not.toContain("gpm");
  });

  it("shuts NVML down only after a read in flight has returned", async () => {
    const events: string[] = [];
    const waiting: (() => void)[] = [];
    const driver = fakeNvml([fakeGpu()], {
      nvmlShutdown: () => (events.push("shutdown"), 0),
      nvmlDeviceGetPcieThroughput: () => new Promise<number>((resolve) => waiting.push(() => resolve(0))),
    });
    const gpus = open(driver.api);
    const pending = gpus.read();
    gpus.close();
    expect(events).toEqual([]);
    events.push("pcie returned");
    for (const finish of waiting) finish();
    await pending;
    await new Promise((r) => setTimeout(r, 0));
    expect(events).toEqual(["pcie returned", "shutdown"]);
    expect(await gpus.read()).toEqual([]);
  });

  it("fails to open with the NVML error, and shuts NVML down when counting fails", () => {
    const driver = fakeNvml([fakeGpu()], { nvmlInit_v2: () => 9 });
    expect(openNvmlGpus(driver.api)).toEqual({ error: "nvmlInit_v2: fake error 9" });
    let shutdowns = 0;
    const counting = fakeNvml([fakeGpu()], { nvmlDeviceGetCount_v2: () => 18, nvmlShutdown: () => (shutdowns++, 0), nvmlErrorString: undefined });
    expect(openNvmlGpus(counting.api)).toEqual({ error: expect.stringMatching(/^nvmlDeviceGetCount_v2: driver\/library version mismatch/) as unknown });
    expect(shutdowns).toBe(1);
  });
});
