import { describe, expect, it } from "vitest";
import { lossParity, parityLine, PARITY_STEPS } from "../../src/tune/parity.ts";

const fp32 = { baseline: "fp32", winner: "fp32" };
const losses = (n: number, f: (i: number) => number) => Array.from({ length: n }, (_, i) => f(i));

describe("loss parity between your configuration's run and the winner's", () => {
  it("matches within the fp32 tolerance over the first 20 steps, and says so", () => {
    const base = losses(30, (i) => 2.3 / (1 + i / 10));
    const win = base.map((l, i) => l + (i % 2 === 0 ? 3e-7 : -2e-7));
    const p = lossParity(base, win, fp32, true);
    expect(p).toMatchObject({ verdict: "match", steps: PARITY_STEPS, tolerance: 1e-4 });
    expect(parityLine(p)).toBe("same model: the first 20 steps' losses match your configuration's within 1e-4 (largest difference 3e-7)");
  });

  it("names the first step where they part, and by how much", () => {
    const base = losses(20, (i) => 2 - i * 0.05);
    const win = base.map((l, i) => (i >= 3 ? l * 1.02 : l));
    const p = lossParity(base, win, fp32, true);
    expect(p).toMatchObject({ verdict: "parted", step: 3, baseline: 1.85 });
    expect(parityLine(p)).toMatch(/^not the same losses: they part at step 3 \(yours 1\.85000, the winner's 1\.88700, 2\.0 % apart \(tolerance 1e-4\)\)/);
  });

  it("a lower precision gets its own tolerance: bf16-mixed within 3 % is the same model", () => {
    const base = losses(10, () => 1.5);
    const win = base.map((l) => l * 1.01);
    expect(lossParity(base, win, { baseline: "fp32", winner: "bf16-mixed" }, true).verdict).toBe("match");
    expect(lossParity(base, win, fp32, true).verdict).toBe("parted");
  });

  it("a non-finite loss of the winner under fp16 is a failure, with the precision named", () => {
    const p = lossParity([1, 1, 1], [1, "nan", 1], { baseline: "fp32", winner: "fp16-mixed" }, true);
    expect(p).toEqual({ verdict: "nonfinite", step: 1, winner: "nan", precision: "fp16-mixed" });
    expect(parityLine(p)).toMatch(/not safe to apply/);
  });

  it("not compared when the effective batch changed, or a loss is unknown, and says why", () => {
    expect(parityLine(lossParity([1], [1], fp32, false))).toMatch(/changes the effective batch/);
    expect(lossParity([1, null], [1, 1], fp32, true)).toEqual({ verdict: "not_comparable", reason: "brim read no loss at step 1 of one of the two runs" });
    expect(lossParity([], [1], fp32, true).verdict).toBe("not_comparable");
  });
});
