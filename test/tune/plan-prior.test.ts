import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { planPrior } from "../../src/tune/plan-prior.ts";

const REPO = resolve(import.meta.dirname, "..", "..");

describe("the plan seeds the first memory probe", () => {
  const dir = join(REPO, "examples", "nbeats");
  const config = parse(readFileSync(join(dir, "config.yaml"), "utf8")) as unknown;
  const h100 = { backend: "nvml", gpus: [{ name: "NVIDIA H100 80GB HBM3", totalBytes: 85520809984 }] };

  it("from the model spec the config names, on a GPU brim knows", async () => {
    const prior = await planPrior(config, dir, h100, 0.9 * 85520809984, "fp32");
    expect(prior).not.toBeNull();
    expect(prior?.bytesPerSample).toBeGreaterThan(0);
    expect(prior?.fixedBytes).toBeGreaterThan(0);
    expect(prior?.maxMicroBatch).toBeGreaterThan(32);
    expect(prior?.source).toMatch(/model\.yaml on h100/);
    const bf16 = await planPrior(config, dir, h100, 0.9 * 85520809984, "bf16-mixed");
    expect(bf16?.bytesPerSample).toBeLessThan(prior?.bytesPerSample ?? 0);
  });

  it("none on CPU, on an unknown GPU, or without a spec", async () => {
    expect(await planPrior(config, dir, { backend: "cpu", gpus: [] }, 1e10, "fp32")).toBeNull();
    expect(await planPrior(config, dir, { backend: "nvml", gpus: [{ name: "mystery", totalBytes: 1e10 }] }, 1e10, "fp32")).toBeNull();
    expect(await planPrior({ data: 1 }, dir, h100, 1e10, "fp32")).toBeNull();
  });
});
