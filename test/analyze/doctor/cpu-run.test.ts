import { describe, expect, it } from "vitest";
import { GIB } from "../synthetic.ts";
import { doctor, fired, get } from "./helpers.ts";

describe("doctor check: cpu-run", () => {
  it("says what can be said and which GPU checks could not be evaluated", () => {
    const r = doctor({ gpu: null, wait: () => 0.3, compute: () => 0.2, workers: 0, treeCpu: 190, cpus: 2, rss: 3 * GIB, precision: "fp32" });
    expect(fired(r)).toEqual(["data_starved", "cpu_run"]);
    const cpu = get(r, "cpu_run");
    expect(cpu.evidence.map((e) => e.label)).toEqual(["data wait share", "throughput", "CPU of the job's processes", "peak RSS"]);
    expect(cpu.evidence[2]?.text).toMatch(/1\.9 of 2 cores/);
    expect(r.not_evaluated.map((n) => n.check).sort()).toEqual([
      "clocks_held_back",
      "fp32_on_tensor_cores",
      "gpu_contexts",
      "launch_bound",
      "memory_unused",
      "pcie_traffic",
      "utilization_gap",
    ]);
    expect(r.not_evaluated.every((n) => /CPU run/.test(n.reason))).toBe(true);
    expect(r.run.device).toBe("CPU (2 cores)");
  });
});
