import { describe, expect, it } from "vitest";
import { GIB } from "../synthetic.ts";
import { doctor, get, HEALTHY } from "./helpers.ts";

describe("doctor check: utilization-gap", () => {
  it("splits the idle points into data wait and gaps inside steps", () => {
    const r = doctor({ ...HEALTHY, wait: () => 0.5, compute: () => 0.3, utilWait: 0, utilCompute: 80 });
    const f = get(r, "utilization_gap");
    expect(f.severity).toBe("info");
    const u = r.measures.gpu_util_mean as number;
    const parts = f.evidence.filter((e) => ["waiting for data", "between steps", "inside steps"].includes(e.label)).map((e) => e.value as number);
    expect(parts.reduce((a, b) => a + b, 0)).toBeCloseTo(100 - u, 6);
    expect(f.summary).toMatch(
      /^The GPU ran kernels \d+ % of the time\. Of the \d+ points it sat idle, about \d+ to waiting for the next batch and \d+ to gaps inside the steps/,
    );
  });
  it("turns into advice when the GPU mostly waits for the host inside the steps", () => {
    const f = get(doctor({ ...HEALTHY, utilWait: 35, utilCompute: 35, sm: null, treeGpuBytes: 10 * GIB, reserved: 8 * GIB }), "utilization_gap");
    expect(f.severity).toBe("medium");
    expect(f.fix.steps[0]).toMatch(/loss\.item\(\)/);
    expect(f.verify).toMatch(/--knob batch_size=32,64,128/);
    expect(get(doctor({ ...HEALTHY, utilWait: 85, utilCompute: 85 }), "utilization_gap").severity).toBe("info");
  });
  it("adds the SM activity caveat in plain words", () => {
    const f = get(doctor({ ...HEALTHY, utilWait: 96, utilCompute: 96, sm: 20, treeGpuBytes: 50 * GIB }), "utilization_gap");
    expect(f.summary).toMatch(/SM activity was 20 %, so most of the card sat idle even then/);
  });
});
