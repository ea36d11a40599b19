import { describe, expect, it } from "vitest";
import { gpuFacts } from "../../src/analyze/gpu.ts";
import { architectureOfCapability, gpuCapabilities } from "../../src/devices/gpu-facts.ts";
import { candidateContext } from "../../src/tune/space.ts";

describe("one source of GPU facts for tune and analyze", () => {
  it("maps compute capabilities to architectures", () => {
    expect(["6.1", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0", "5.2", "x"].map(architectureOfCapability)).toEqual([
      "pascal",
      "volta",
      "turing",
      "ampere",
      "ampere",
      "ada",
      "hopper",
      "blackwell",
      "blackwell",
      null,
      null,
    ]);
  });

  it("GTX 16xx is Turing without tensor cores, whatever the source", () => {
    for (const cc of [null, "7.5"]) {
      const f = gpuCapabilities({ name: "NVIDIA GeForce GTX 1660 SUPER", computeCapability: cc });
      expect(f).toMatchObject({ architecture: "turing", tensorCores: false, bf16: false });
    }
    expect(gpuFacts("NVIDIA GeForce GTX 1650", null).tensor_cores).toBe(false);
  });

  it("the compute capability wins over the name; unknown stays unknown", () => {
    expect(gpuCapabilities({ name: "mystery card", computeCapability: "8.0" })).toMatchObject({ architecture: "ampere", tensorCores: true, bf16: true });
    expect(gpuCapabilities({ name: "mystery card" })).toMatchObject({ architecture: null, tensorCores: null, bf16: null });
    expect(gpuCapabilities({ name: "Tesla T4" })).toMatchObject({ architecture: "turing", tensorCores: true, bf16: false });
  });

  it("tune and analyze agree on every card", () => {
    const cards: [string, string | null][] = [
      ["NVIDIA H100 80GB HBM3", "9.0"],
      ["Tesla T4", "7.5"],
      ["NVIDIA GeForce GTX 1660", "7.5"],
      ["Tesla V100-SXM2-16GB", "7.0"],
      ["NVIDIA GeForce RTX 3090", "8.6"],
      ["Tesla P100-PCIE-16GB", "6.0"],
      ["NVIDIA L4", null],
      ["mystery", null],
    ];
    for (const [name, cc] of cards) {
      const analyze = gpuFacts(name, null, cc);
      const tune = candidateContext({ backend: "nvml", gpus: [{ name, computeCapability: cc }], cpus: 4 });
      expect(tune.tensorCores, name).toBe(analyze.tensor_cores === true);
      expect(tune.bf16, name).toBe(analyze.bf16 === true);
    }
  });
});
