import { describe, expect, it } from "vitest";
import { doctor, get, HEALTHY } from "./helpers.ts";

// a torch.compile run as measured on CPU (test/frameworks): ~1 ms steps after ~300 ms of compilation
const compiled = (slowUntil: number) => (i: number) => (i < slowUntil ? 0.3 : 0.001);

describe("doctor check: slow-steps", () => {
  it("explains slow first steps inside the warm-up (compilation) without asking for a change", () => {
    const r = doctor({ ...HEALTHY, steps: 40, warmup: 3, wait: () => 0, compute: compiled(2) });
    const f = get(r, "slow_steps");
    expect(f.severity).toBe("info");
    expect(f.title).toMatch(/warm-up, left out of throughput/);
    expect(f.summary).toMatch(/compilation \(torch\.compile/);
    expect(f.evidence[0]?.text).toMatch(/1\.00 ms to 300 ms/);
    expect(f.evidence[1]?.text).toMatch(/\(steps 1, 2\).*all of them warm-up/);
  });

  it("asks for a longer warm-up when the slow first steps outlast it", () => {
    const r = doctor({ ...HEALTHY, steps: 40, warmup: 1, wait: () => 0, compute: compiled(4) });
    const f = get(r, "slow_steps");
    expect(f.title).toBe("Warm-up longer than the warm-up steps");
    expect(f.fix.steps[0]).toMatch(/--warmup 4/);
    expect(f.summary).toMatch(/3 of them count in throughput/);
  });

  it("points at recompilation for a slow step in steady state", () => {
    const r = doctor({ ...HEALTHY, steps: 40, warmup: 3, wait: () => 0, compute: (i) => (i === 20 ? 0.5 : 0.01) });
    const f = get(r, "slow_steps");
    expect(f.title).toBe("Slow steps in steady state");
    expect(f.fix.steps.join(" ")).toMatch(/TORCH_LOGS=recompiles/);
  });

  it("passes even steps and ignores a few ms over a sub-ms median", () => {
    const r = doctor({ ...HEALTHY, steps: 40, warmup: 3, wait: () => 0, compute: (i) => (i === 20 ? 0.004 : 0.0002) });
    expect(r.passed.find((p) => p.check === "slow_steps")?.why).toMatch(/none 10× the median/);
  });
});
