import { describe, expect, it } from "vitest";
import { THROTTLE_REASONS } from "../../../src/analyze/thresholds.ts";
import { THROTTLE_REASONS as DECODED } from "../../../src/devices/nvml-structs.ts";
import { doctor, fired, get, HEALTHY } from "./helpers.ts";

describe("doctor check: clocks-held-back", () => {
  it("flags clocks held back by power with the share of time and the cost", () => {
    const f = get(doctor({ ...HEALTHY, throttle: (i) => (i % 2 === 0 ? ["sw_power_cap"] : []) }), "clocks_held_back");
    const share = f.evidence.find((e) => e.label === "time held back")?.value as number;
    expect(share).toBeGreaterThan(0.4);
    expect(share).toBeLessThan(0.6);
    const cost = f.evidence.find((e) => e.label === "estimated cost")?.value as number;
    expect(cost).toBeCloseTo(share * (1 - 1200 / 1410), 6);
    expect(f.fix.steps[0]).toMatch(/nvidia-smi -pl/);
    expect(f.verify).toBeNull();
    expect(fired(doctor({ ...HEALTHY, throttle: () => ["gpu_idle"] }))).not.toContain("clocks_held_back");
    expect(doctor({ ...HEALTHY, throttle: () => null }).not_evaluated.map((n) => n.check)).toContain("clocks_held_back");
  });

  it("counts only reasons a backend can report (both decode NVML's bits by one table)", () => {
    const names = DECODED.map(([, name]) => name);
    for (const reason of THROTTLE_REASONS) expect(names).toContain(reason);
  });
});
