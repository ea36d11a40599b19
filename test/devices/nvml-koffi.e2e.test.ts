import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { openDevices } from "../../src/devices/index.ts";
import { loadNvmlLibrary } from "../../src/devices/nvml-koffi.ts";
import { findOnPath } from "../../src/devices/nvidia-smi.ts";

// The real koffi binding against a C stand-in for libnvidia-ml (needs a C compiler).
const compiler = findOnPath("gcc") ?? findOnPath("cc");

describe.skipIf(compiler === null)("the koffi binding over a compiled fake libnvidia-ml", () => {
  let library = "";
  beforeAll(() => {
    library = join(mkdtempSync(join(tmpdir(), "brim-nvml-")), "libnvidia-ml.so.1");
    execFileSync(compiler as string, ["-shared", "-fPIC", "-O1", "-o", library, new URL("fixtures/fake-libnvidia-ml.c", import.meta.url).pathname]);
  });

  it("binds what the library exports and leaves the rest out", () => {
    const loaded = loadNvmlLibrary(library);
    if ("error" in loaded) throw new Error(loaded.error);
    expect(typeof loaded.api.nvmlDeviceGetMemoryInfo_v2).toBe("function");
    expect(loaded.api.nvmlDeviceGetEnforcedPowerLimit).toBeUndefined();
    expect(loaded.api.nvmlGpmSampleGet).toBeUndefined();
    expect(loaded.api.nvmlErrorString?.(2)).toBe("Invalid Argument");
  });

  it("reads GPUs, passing handles, buffers and 64-bit numbers both ways", async () => {
    const devices = openDevices({ nvmlLibrary: library, smiPath: null });
    const inventory = devices.inventory();
    expect(inventory).toMatchObject({ backend: "nvml", note: null, driver: "999.12.34", cuda: "12.8" });
    expect(inventory.gpus.map((g) => [g.index, g.name, g.uuid, g.totalBytes, g.computeCapability])).toEqual([
      [0, "Fake GPU 0", "GPU-fake-0", 24 * 2 ** 30, null],
      [1, "Fake GPU 1", "GPU-fake-1", 24 * 2 ** 30, null],
    ]);
    const started = performance.now();
    const reading = await devices.read(process.pid);
    expect(performance.now() - started).toBeGreaterThanOrEqual(19);
    const [gpu0, gpu1] = reading.gpus;
    expect(gpu0).toMatchObject({
      usedBytes: 6 * 2 ** 30,
      reservedBytes: 314_572_800,
      util: 70,
      memUtil: 30,
      powerW: 123.456,
      powerLimitW: null,
      energyJ: 9_876_543_210.123,
      smClockMHz: 1755,
      memClockMHz: 9501,
      throttle: ["sw_power_cap", "sw_thermal"],
      pcieTxKBs: 111,
      pcieRxKBs: 222,
      smActivity: null,
      lost: false,
    });
    expect(gpu0?.processes).toEqual([{ pid: process.pid, usedBytes: 5 * 2 ** 30, smUtil: 64, memUtil: 16 }]);
    expect(gpu1).toMatchObject({ usedBytes: 12 * 2 ** 30, util: 71, processes: [] });
    expect(reading.tree?.gpuBytes).toBe(5 * 2 ** 30);
    expect(inventory.gpus[0]?.available).toEqual(expect.arrayContaining(["util", "util_samples", "processes", "power", "energy", "clocks", "throttle"]));
    expect(devices.inventory().gpus[0]?.available).toContain("pcie");
    expect(devices.inventory().gpus[0]?.available).not.toContain("power_limit");

    // The driver's two samples were taken by the probe at open; the 64-bit lastSeenTimeStamp that
    // came back from them goes in intact, so they are not returned again.
    expect(gpu0?.utilSamples).toEqual([]);
    devices.close();
  });
});
