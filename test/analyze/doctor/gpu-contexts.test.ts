import { describe, expect, it } from "vitest";
import { GIB } from "../synthetic.ts";
import { doctor, fired, get, HEALTHY } from "./helpers.ts";

describe("doctor check: gpu-contexts", () => {
  it("flags many processes each holding a GPU context, and JAX preallocating", () => {
    const many = get(doctor({ ...HEALTHY, treeGpuBytes: 30 * GIB, reserved: 8 * GIB, gpuPids: 9 }), "gpu_contexts");
    expect(many.title).toBe("Many processes each hold a GPU context");
    expect(many.confidence.level).toBe("high");
    expect(many.evidence.find((e) => e.label === "outside the main allocator")?.value).toBe(22 * GIB);
    expect(many.fix.steps.join(" ")).toMatch(/CUDA_VISIBLE_DEVICES=/);
    const jax = get(doctor({ ...HEALTHY, jax: true, treeGpuBytes: 64 * GIB, earlyGpuBytes: 61 * GIB, reserved: 4 * GIB }), "gpu_contexts");
    expect(jax.title).toBe("A framework preallocates GPU memory");
    expect(jax.fix.steps[0]).toMatch(/XLA_PYTHON_CLIENT_PREALLOCATE=false/);
    expect(fired(doctor({ ...HEALTHY, gpuPids: 1 }))).not.toContain("gpu_contexts");
  });
  it("counts processes from the GPU's list when the tree's count is missing, less surely", () => {
    const f = get(doctor({ ...HEALTHY, treeGpuBytes: 30 * GIB, reserved: 8 * GIB, gpuProcesses: 6 }), "gpu_contexts");
    expect(f.confidence.level).toBe("medium");
    expect(f.confidence.reason).toMatch(/may include processes outside the job/);
  });
});
