import { describe, expect, it } from "vitest";
import { GIB } from "../synthetic.ts";
import { doctor, fired, get, HEALTHY } from "./helpers.ts";

describe("doctor check: launch-bound", () => {
  it("fires on high utilization with low SM activity, and suggests bigger micro-batches and CUDA graphs", () => {
    const f = get(doctor({ ...HEALTHY, treeGpuBytes: 10 * GIB, reserved: 8 * GIB, utilWait: 96, utilCompute: 96, sm: 22 }), "launch_bound");
    expect(f.confidence.level).toBe("high");
    expect(f.evidence.map((e) => e.label)).toEqual(["GPU utilization", "SM activity", "micro-batch"]);
    expect(f.fix.steps.join(" ")).toMatch(/CUDA graph.*reduce-overhead/);
    expect(f.knobs[0]?.name).toBe("batch_size");
    expect(f.knobs[0]?.values[0]).toBe(32);
    expect(f.verify).toBe("brim tune --knob batch_size=32,64,128 -- python train.py --config config.yaml");
  });
  it("judges very short steps without SM activity, with lower confidence", () => {
    const f = get(doctor({ ...HEALTHY, sm: null, wait: () => 0.0002, compute: () => 0.004, steps: 200 }), "launch_bound");
    expect(f.confidence.level).toBe("medium");
    expect(f.confidence.reason).toMatch(/SM activity \(GPM, Hopper and newer\) was not recorded/);
  });
  it("stays silent when the SMs are busy", () => {
    expect(fired(doctor({ ...HEALTHY, sm: 75 }))).not.toContain("launch_bound");
  });
});
