import { describe, expect, it } from "vitest";
import { GIB } from "../synthetic.ts";
import { doctor, get, HEALTHY } from "./helpers.ts";

describe("doctor check: fp32-on-tensor-cores", () => {
  it("flags fp32 on an A100 and proposes bf16-mixed", () => {
    const f = get(doctor({ ...HEALTHY, precision: "fp32" }), "fp32_on_tensor_cores");
    expect(f.severity).toBe("high");
    expect(f.confidence.level).toBe("high");
    expect(f.fix.summary).toBe("switch to bf16-mixed");
    expect(f.knobs).toEqual([{ name: "precision", values: ["fp32", "tf32", "bf16-mixed"] }]);
  });
  it("proposes fp16-mixed on a T4 (no fast bf16), and nothing on a card without tensor cores", () => {
    expect(
      get(doctor({ ...HEALTHY, precision: "fp32", gpu: { name: "Tesla T4", total_bytes: 15 * GIB }, treeGpuBytes: 12 * GIB }), "fp32_on_tensor_cores").fix
        .summary,
    ).toBe("switch to fp16-mixed");
    const pascal = doctor({ ...HEALTHY, precision: "fp32", gpu: { name: "NVIDIA GeForce GTX 1080 Ti", total_bytes: 11 * GIB }, treeGpuBytes: 9 * GIB });
    expect(pascal.passed.find((p) => p.check === "fp32_on_tensor_cores")?.why).toMatch(/no tensor cores/);
  });
  it("uses the run's knobs when the job did not report reading its precision, and says when it cannot tell", () => {
    const fromKnobs = get(doctor({ ...HEALTHY, precision: null, knobs: { precision: "fp32" } }), "fp32_on_tensor_cores");
    expect(fromKnobs.confidence.level).toBe("medium");
    const unknown = doctor({ ...HEALTHY, precision: null });
    expect(unknown.not_evaluated.find((n) => n.check === "fp32_on_tensor_cores")?.reason).toMatch(/did not report its precision/);
  });
});
