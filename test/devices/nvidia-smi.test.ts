import { describe, expect, it } from "vitest";
import { SMI_GPU_FIELDS, parseSmiApps, parseSmiCsv, parseSmiGpus, smiValue } from "../../src/devices/nvidia-smi.ts";

const FIELDS = [...SMI_GPU_FIELDS, "clocks_throttle_reasons.active"];

describe("nvidia-smi CSV", () => {
  it("reads [N/A], [Not Supported] and other bracketed words as no value", () => {
    expect(smiValue(" 42 ")).toBe("42");
    for (const raw of ["[N/A]", "[Not Supported]", "N/A", "", "[Insufficient Permissions]", "[Unknown Error]"]) expect(smiValue(raw)).toBeNull();
  });

  it("joins a GPU name that holds a comma back together", () => {
    expect(parseSmiCsv("0, Quadro RTX 6000, rev A, GPU-1\n\n", 3, 1)).toEqual([["0", "Quadro RTX 6000,rev A", "GPU-1"]]);
    expect(parseSmiCsv("0, x\n", 3, 1)).toEqual([]);
  });

  it("parses --query-gpu rows in MiB, W and MHz", () => {
    const text = [
      "0, Tesla T4, GPU-aaaa, 535.104.05, 15360, 1024, 37, 12, 27.50, 70.00, 1590, 5000, 0x0000000000000004",
      "1, NVIDIA GeForce RTX 3060, GPU-bbbb, 535.104.05, 12288, [N/A], [Not Supported], [Not Supported], [N/A], [N/A], 210, 405, [Not Supported]",
    ].join("\n");
    const [t4, rtx] = parseSmiGpus(text, FIELDS);
    expect(t4).toEqual({
      index: 0,
      name: "Tesla T4",
      uuid: "GPU-aaaa",
      driver: "535.104.05",
      totalBytes: 15360 * 2 ** 20,
      usedBytes: 1024 * 2 ** 20,
      util: 37,
      memUtil: 12,
      powerW: 27.5,
      powerLimitW: 70,
      smClockMHz: 1590,
      memClockMHz: 5000,
      computeCapability: null,
      throttle: ["sw_power_cap"],
      lost: false,
    });
    expect(rtx).toMatchObject({ index: 1, usedBytes: null, util: null, memUtil: null, powerW: null, throttle: null, smClockMHz: 210 });
  });

  it("parses --query-compute-apps", () => {
    expect(parseSmiApps("4242, 1024, GPU-aaaa\n4243, [N/A], GPU-bbbb\nNo running processes found\n")).toEqual([
      { pid: 4242, usedBytes: 2 ** 30, uuid: "GPU-aaaa" },
      { pid: 4243, usedBytes: null, uuid: "GPU-bbbb" },
    ]);
  });
});
