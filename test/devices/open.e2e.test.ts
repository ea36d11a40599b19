import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { openDevices, treeGpuBytes } from "../../src/devices/index.ts";
import { runDevice as toDeviceRecord, sampleEntryOf as toSampleLine } from "../../src/guard/guard.ts";
import { loadNvmlLibrary } from "../../src/devices/nvml-koffi.ts";
import { fakeGpu, fakeNvml } from "./fake-nvml.ts";
import { scaled } from "../helpers/time.ts";

const CPU_NOTE = "no NVIDIA GPU found (libnvidia-ml.so.1 not loadable): CPU mode, caps and readings apply to RAM";

describe("openDevices on this machine (no NVIDIA library)", () => {
  it("runs in CPU mode with the one note line", async () => {
    const devices = openDevices({ smiPath: null });
    const inventory = devices.inventory();
    expect(inventory).toMatchObject({ backend: "cpu", note: CPU_NOTE, driver: null, cuda: null, gpus: [] });
    expect(inventory.host.cpus).toBeGreaterThan(0);
    expect(inventory.host.memTotalBytes).toBeGreaterThan(2 ** 26);
    const reading = await devices.read(process.pid);
    expect(reading.gpus).toEqual([]);
    expect(reading.tree).toMatchObject({ rootPid: process.pid, gpuBytes: null });
    expect(reading.tree?.rssBytes).toBeGreaterThan(0);
    expect(reading.host.memAvailableBytes).toBeGreaterThan(0);
    expect(Math.abs(reading.t - Date.now() / 1000)).toBeLessThan(scaled(5000) / 1000);
    expect((await devices.read(null)).tree).toBeNull();
    devices.close();
    devices.close();
  });

  it("looks on PATH for nvidia-smi and, finding none, still says CPU mode", () => {
    const saved = process.env.PATH;
    process.env.PATH = "/nonexistent";
    try {
      expect(openDevices().inventory().note).toBe(CPU_NOTE);
    } finally {
      process.env.PATH = saved;
    }
  });

  it("never throws when the library is missing or is not NVML", () => {
    expect(loadNvmlLibrary("/nonexistent/libnvidia-ml.so.1")).toEqual({ error: "/nonexistent/libnvidia-ml.so.1 not loadable" });
    expect(loadNvmlLibrary("libc.so.6")).toEqual({ error: expect.stringMatching(/lacks nvmlInit_v2/) as unknown });
    const devices = openDevices({ nvmlLibrary: "libc.so.6", smiPath: null });
    expect(devices.inventory().backend).toBe("cpu");
    expect(devices.inventory().note).toMatch(/^no NVIDIA GPU found \(libc\.so\.6 lacks nvmlInit_v2/);
  });
});

describe("openDevices over a fake NVML", () => {
  it("reads GPUs, the job's tree and the GPU memory the tree holds", async () => {
    const child = spawn("sh", ["-c", "sleep 30 & echo $!; wait"], { stdio: ["ignore", "pipe", "inherit"], detached: true });
    try {
      const grandchild = await new Promise<number>((resolve) => child.stdout.once("data", (d: Buffer) => resolve(Number(d.toString().trim()))));
      const root = child.pid ?? 0;
      const gpu = fakeGpu({
        processes: [
          { pid: grandchild, usedBytes: 3n * 2n ** 30n },
          { pid: root, usedBytes: 2n ** 30n },
          { pid: 1, usedBytes: 5n * 2n ** 30n },
        ],
      });
      const devices = openDevices({ nvml: fakeNvml([gpu]).api });
      expect(devices.inventory()).toMatchObject({ backend: "nvml", note: null, driver: "550.54.15", cuda: "12.4" });
      const reading = await devices.read(root);
      expect(new Set(reading.tree?.pids)).toEqual(new Set([root, grandchild]));
      expect(reading.tree?.gpuBytes).toBe(4 * 2 ** 30);
      expect(reading.gpus[0]?.processes).toHaveLength(3);

      const line = toSampleLine(reading);
      expect(line).toMatchObject({
        kind: "sample",
        t: reading.t,
        tree: { pids: 2, gpu_bytes: 4 * 2 ** 30 },
        gpus: [{ index: 0, used_bytes: 2_000_000_000, util: 97, power_w: 350, sm_clock_mhz: 1980 }],
      });
      expect(Object.keys((line.gpus as object[])[0] ?? {})).toEqual([
        "index",
        "used_bytes",
        "total_bytes",
        "util",
        "mem_util",
        "sm_activity",
        "tensor_activity",
        "power_w",
        "energy_j",
        "sm_clock_mhz",
        "throttle",
        "pcie_tx_kbs",
        "pcie_rx_kbs",
        "processes",
      ]);
      expect(toDeviceRecord(devices.inventory())).toEqual({
        backend: "nvml",
        driver: "550.54.15",
        gpus: [{ index: 0, name: "NVIDIA H100 80GB HBM3", uuid: "GPU-11111111-2222-3333-4444-555555555555", total_bytes: 85_520_809_984 }],
        host: { cpus: devices.inventory().host.cpus, mem_total_bytes: devices.inventory().host.memTotalBytes },
      });
      devices.close();
    } finally {
      process.kill(-(child.pid ?? 0), "SIGKILL");
    }
  });

  it("says why NVML failed when it loads but cannot start", () => {
    const devices = openDevices({ nvml: fakeNvml([fakeGpu()], { nvmlInit_v2: () => 9, nvmlErrorString: () => "Driver Not Loaded" }).api, smiPath: null });
    expect(devices.inventory().note).toBe("no NVIDIA GPU found (nvmlInit_v2: Driver Not Loaded): CPU mode, caps and readings apply to RAM");
    const none = openDevices({ nvml: fakeNvml([]).api, smiPath: null });
    expect(none.inventory().note).toBe("no NVIDIA GPU found (NVML sees no GPU): CPU mode, caps and readings apply to RAM");
  });
});

describe("treeGpuBytes", () => {
  const p = (pid: number, usedBytes: number | null) => ({ pid, usedBytes, smUtil: null, memUtil: null });

  it("sums the tree's processes and is null when the driver hides one of them", () => {
    expect(
      treeGpuBytes(
        [10, 11],
        [p(10, 100), p(11, 50), p(12, 1000)],
        () => true,
        () => null,
      ),
    ).toBe(150);
    expect(
      treeGpuBytes(
        [10],
        [],
        () => true,
        () => null,
      ),
    ).toBe(0);
    expect(
      treeGpuBytes(
        [10, 11],
        [p(10, 100), p(11, null)],
        () => true,
        () => null,
      ),
    ).toBeNull();
  });

  it("matches pids from another PID namespace through NSpid", () => {
    // This procfs shows the job as 81234/81240; the driver reports the pids the job has inside its container.
    const nsPids: Record<number, number[]> = { 81234: [81234, 1], 81240: [81240, 7] };
    const visible = (pid: number): boolean => pid === 81234 || pid === 81240 || pid === 7777;
    expect(treeGpuBytes([81234, 81240], [p(7, 300), p(7777, 5)], visible, (pid) => nsPids[pid] ?? null)).toBe(300);
  });
});
