import { describe, expect, it } from "vitest";
import { GIB } from "../synthetic.ts";
import { doctor, fired, get, HEALTHY } from "./helpers.ts";

describe("doctor check: memory-unused", () => {
  it("fires when the peak is far under the card, with a conservative micro-batch", () => {
    const f = get(doctor({ ...HEALTHY, treeGpuBytes: 10 * GIB, reserved: 8 * GIB }), "memory_unused");
    expect(f.evidence.find((e) => e.label === "share used")?.value).toBeCloseTo(10 / 80, 6);
    // 32 × 80 GiB × 0.9 / 10 GiB = 230
    expect(f.fix.steps[0]).toMatch(/from 32 toward 230/);
    expect(f.knobs).toEqual([{ name: "batch_size", values: [32, 64, 128] }]);
  });
  it("trades accumulation for micro-batch when the job accumulates", () => {
    const f = get(doctor({ ...HEALTHY, treeGpuBytes: 10 * GIB, reserved: 8 * GIB, accumulation: 8 }), "memory_unused");
    // 230 fit by the conservative estimate: ×4 is the largest power of two that also divides accumulation 8
    expect(f.fix.steps[0]).toMatch(/from 32 to 128 and lower accumulation from 8 to 2: the same effective batch \(256\)/);
    expect(f.knobs.map((k) => k.name)).toEqual(["batch_size", "accumulation"]);
  });
  it("measures against the cap when there is one", () => {
    const r = doctor({ ...HEALTHY, treeGpuBytes: 10 * GIB, reserved: 8 * GIB, cap: 16 * GIB });
    expect(fired(r)).not.toContain("memory_unused");
    expect(r.passed.find((p) => p.check === "memory_unused")?.why).toMatch(/62\.5 % of the cap/);
  });
  it("stays silent after out-of-memory recoveries", () => {
    const r = doctor({
      ...HEALTHY,
      treeGpuBytes: 10 * GIB,
      events: [{ step: 5, event: "oom_recovered", details: { batch: 32, split: 2, micro_batch: 16, accumulation: 2 } }],
    });
    expect(fired(r)).not.toContain("memory_unused");
    const oom = get(r, "oom_recovered");
    expect(oom.fix.steps[0]).toMatch(/Set the micro-batch to 16 and multiply accumulation by 2/);
  });
});
