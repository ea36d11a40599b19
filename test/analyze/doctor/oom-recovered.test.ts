import { describe, expect, it } from "vitest";
import { doctor, fired, get, HEALTHY } from "./helpers.ts";

describe("doctor check: oom-recovered", () => {
  it("turns the SDK's out-of-memory recoveries into the micro-batch that fits", () => {
    const events = [3, 9].map((step) => ({
      step,
      event: "oom_recovered",
      message: "split the batch",
      details: { batch: 64, micro_batch: 32, split: 2, accumulation: 2 },
    }));
    const r = doctor({ ...HEALTHY, batch: 64, events });
    const f = get(r, "oom_recovered");
    expect(f.evidence[0]?.value).toBe(2);
    expect(f.evidence[0]?.text).toMatch(/2 steps ran out of memory and were retried in smaller chunks \(first at step 3\)/);
    expect(f.fix.steps[0]).toBe("Set the micro-batch to 32 and multiply accumulation by 2: the same effective batch with no failed attempts.");
    expect(f.knobs).toEqual([{ name: "batch_size", values: [32, 48, 64] }]);
    expect(r.measures.oom_recoveries).toBe(2);
  });

  it("passes a run without recoveries", () => {
    const r = doctor(HEALTHY);
    expect(fired(r)).not.toContain("oom_recovered");
    expect(r.passed.find((p) => p.check === "oom_recovered")?.why).toBe("no out-of-memory recoveries");
  });
});
