import { describe, expect, it } from "vitest";
import { doctor, fired, get, HEALTHY } from "./helpers.ts";

describe("doctor check: pcie-traffic", () => {
  it("flags heavy host-to-device traffic from the PCIe counters", () => {
    const f = get(doctor({ ...HEALTHY, pcieRxKBs: 6e6 }), "pcie_traffic");
    expect(f.evidence[0]?.value).toBeCloseTo(6e6 * 1024, 0);
    expect(f.fix.steps[0]).toMatch(/pin_memory=True.*non_blocking=True/);
    expect(fired(doctor({ ...HEALTHY, pcieRxKBs: 1e5 }))).not.toContain("pcie_traffic");
  });
});
