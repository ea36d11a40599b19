import { describe, it, expect } from "vitest";
import { GPU_CATALOG, findGpu, gpuIds, type GpuArchitecture } from "../../src/plan/catalog.ts";

const BF16_ARCHS: ReadonlySet<GpuArchitecture> = new Set(["ampere", "ada", "hopper", "blackwell"]);
const KEBAB = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

describe("GPU_CATALOG", () => {
  it("has at least 20 entries", () => {
    expect(GPU_CATALOG.length).toBeGreaterThanOrEqual(20);
  });

  it("has the cards the planner promises", () => {
    const required = [
      "t4",
      "p100-16gb",
      "v100-16gb",
      "v100-32gb",
      "rtx-3060",
      "rtx-3080",
      "rtx-3090",
      "rtx-4060",
      "rtx-4060-laptop",
      "rtx-4070",
      "rtx-4080",
      "rtx-4090",
      "quadro-rtx-6000",
      "rtx-a6000",
      "rtx-6000-ada",
      "a10",
      "l4",
      "l40s",
      "a100-40gb",
      "a100-80gb",
      "h100-pcie",
      "h100-sxm",
      "h200",
    ];
    const ids = new Set(gpuIds());
    for (const id of required) expect(ids.has(id), id).toBe(true);
  });

  it("uses kebab-case ids and lower-case dashed aliases", () => {
    for (const gpu of GPU_CATALOG) {
      expect(gpu.id, gpu.id).toMatch(KEBAB);
      for (const alias of gpu.aliases) expect(alias, `${gpu.id}: ${alias}`).toMatch(KEBAB);
    }
  });

  it("has unique ids and aliases across the whole catalog", () => {
    const seen = new Map<string, string>();
    for (const gpu of GPU_CATALOG) {
      for (const key of [gpu.id, ...gpu.aliases]) {
        expect(seen.get(key), `"${key}" used by ${seen.get(key)} and ${gpu.id}`).toBeUndefined();
        seen.set(key, gpu.id);
      }
    }
  });

  it("has positive fp32, bandwidth, memory and SM counts and a source for every card", () => {
    for (const gpu of GPU_CATALOG) {
      expect(gpu.peakTflops.fp32, gpu.id).toBeGreaterThan(0);
      expect(gpu.bandwidthGBs, gpu.id).toBeGreaterThan(0);
      expect(gpu.memoryGiB, gpu.id).toBeGreaterThan(0);
      expect(gpu.sms, gpu.id).toBeGreaterThan(0);
      expect(Number.isInteger(gpu.sms), gpu.id).toBe(true);
      expect(gpu.source.trim().length, gpu.id).toBeGreaterThan(0);
      expect(gpu.name.trim().length, gpu.id).toBeGreaterThan(0);
    }
  });

  it("lists bf16 (and tf32) exactly for Ampere and newer", () => {
    for (const gpu of GPU_CATALOG) {
      const modern = BF16_ARCHS.has(gpu.architecture);
      expect(gpu.peakTflops.bf16 !== undefined, `${gpu.id} bf16`).toBe(modern);
      expect(gpu.peakTflops.tf32 !== undefined, `${gpu.id} tf32`).toBe(modern);
    }
  });

  it("keeps tensor rates at or above fp32 and reported memory below the sold size", () => {
    for (const gpu of GPU_CATALOG) {
      const { fp32, tf32, fp16, bf16 } = gpu.peakTflops;
      for (const rate of [tf32, fp16, bf16]) {
        if (rate !== undefined) expect(rate, gpu.id).toBeGreaterThanOrEqual(fp32);
      }
      if (gpu.reportedTotalMiB !== undefined) {
        expect(gpu.reportedTotalMiB, gpu.id).toBeGreaterThan(gpu.memoryGiB * 1024 * 0.9);
        expect(gpu.reportedTotalMiB, gpu.id).toBeLessThanOrEqual(gpu.memoryGiB * 1024 * 1.02);
      }
    }
  });
});

describe("findGpu", () => {
  it("finds every card by its id and by each alias", () => {
    for (const gpu of GPU_CATALOG) {
      expect(findGpu(gpu.id)).toBe(gpu);
      for (const alias of gpu.aliases) expect(findGpu(alias), alias).toBe(gpu);
    }
  });

  it("ignores case, spaces and underscores", () => {
    const rtx4090 = findGpu("rtx-4090");
    expect(rtx4090?.id).toBe("rtx-4090");
    expect(findGpu("RTX 4090")).toBe(rtx4090);
    expect(findGpu("rtx_4090")).toBe(rtx4090);
    expect(findGpu("  Rtx-4090 ")).toBe(rtx4090);
    expect(findGpu("4090")).toBe(rtx4090);
    expect(findGpu("GeForce RTX 4090")).toBe(rtx4090);
    expect(findGpu("A100_80GB")?.id).toBe("a100-80gb");
    expect(findGpu("H100 SXM")?.id).toBe("h100-sxm");
  });

  it("accepts names as nvidia-smi prints them", () => {
    expect(findGpu("NVIDIA GeForce RTX 4090")?.id).toBe("rtx-4090");
    expect(findGpu("Tesla T4")?.id).toBe("t4");
    expect(findGpu("NVIDIA A100-SXM4-80GB")?.id).toBe("a100-80gb");
    expect(findGpu("NVIDIA H100 80GB HBM3")?.id).toBe("h100-sxm");
    expect(findGpu("NVIDIA H100 PCIe")?.id).toBe("h100-pcie");
    expect(findGpu("Tesla V100-SXM2-32GB")?.id).toBe("v100-32gb");
    expect(findGpu("NVIDIA L4")?.id).toBe("l4");
    expect(findGpu("NVIDIA RTX 6000 Ada Generation")?.id).toBe("rtx-6000-ada");
    expect(findGpu("NVIDIA GeForce RTX 4060 Laptop GPU")?.id).toBe("rtx-4060-laptop");
  });

  it("returns undefined for unknown or empty names", () => {
    expect(findGpu("voodoo-2")).toBeUndefined();
    expect(findGpu("rtx-9999")).toBeUndefined();
    expect(findGpu("")).toBeUndefined();
    expect(findGpu("   ")).toBeUndefined();
    expect(findGpu("nvidia")).toBeUndefined();
  });
});

describe("gpuIds", () => {
  it("returns every id in catalog order", () => {
    expect(gpuIds()).toEqual(GPU_CATALOG.map((g) => g.id));
    expect(new Set(gpuIds()).size).toBe(GPU_CATALOG.length);
  });
});
