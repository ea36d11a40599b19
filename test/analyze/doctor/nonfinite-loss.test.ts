import { describe, expect, it } from "vitest";
import { measureRun } from "../../../src/analyze/measure.ts";
import { readTimeline } from "../../../src/record/timeline/index.ts";
import { GIB, syntheticRun } from "../synthetic.ts";
import { doctor, fired, get, HEALTHY } from "./helpers.ts";

describe("doctor check: nonfinite-loss", () => {
  it("flags non-finite fp16 losses and the fallback, proposing bf16 where the card has it", () => {
    const events = [
      ...[10, 11, 12].map((step, i) => ({ step, event: "nonfinite_loss", details: { precision: "fp16-mixed", count: i + 1 } })),
      {
        step: 12,
        event: "precision_fallback",
        message: "fp16-mixed losses were non-finite 3 times in a row; continuing in fp32",
        details: { from: "fp16-mixed", to: "fp32", reason: "nonfinite_loss", count: 3 },
      },
    ];
    const r = doctor({ ...HEALTHY, precision: "fp16-mixed", events });
    const f = get(r, "nonfinite_loss");
    expect(f.severity).toBe("high");
    expect(f.evidence[0]?.text).toMatch(/3 steps with a NaN\/inf loss under fp16-mixed \(first at step 10\)/);
    expect(f.fix.steps[0]).toMatch(/bf16-mixed/);
    expect(f.knobs).toEqual([{ name: "precision", values: ["fp16-mixed", "bf16-mixed", "fp32"] }]);
    expect(
      measureRun(
        syntheticRun({ ...HEALTHY, precision: "fp16-mixed", events }).meta,
        readTimeline(syntheticRun({ ...HEALTHY, precision: "fp16-mixed", events }).timeline),
      ).precision,
    ).toBe("fp32");
    const t4 = get(
      doctor({ ...HEALTHY, precision: "fp16-mixed", gpu: { name: "Tesla T4", total_bytes: 15 * GIB }, treeGpuBytes: 12 * GIB, events }),
      "nonfinite_loss",
    );
    expect(t4.fix.steps[0]).toMatch(/no fast bf16/);
    expect(fired(doctor(HEALTHY))).not.toContain("nonfinite_loss");
  });
});
