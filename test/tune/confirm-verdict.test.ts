import { describe, expect, it } from "vitest";
import { confirmationOutcome, confirmSpeedup, confirmWinner, intervalVerdict } from "../../src/tune/confirm.ts";
import { renderTuneTable } from "../../src/cli/render-tune.ts";
import { tuneSchema } from "../../src/record/schema.ts";
import type { Knobs, TrialResult } from "../../src/tune/types.ts";

const ok = (sps: number): TrialResult => ({
  end: "ok",
  samplesPerSecond: sps,
  stepSeconds: [1, 1, 1],
  peakBytes: null,
  frameworkPeakBytes: null,
  durationS: 10,
  oomRecoveries: 0,
});

describe("a verdict says what was measured: a slowdown is not noise", () => {
  it("reads an interval above 1.0 as confirmed, wholly below as slower, holding 1.0 as no gain", () => {
    expect(intervalVerdict(1.02, 1.4)).toBe("confirmed");
    expect(intervalVerdict(0.28, 0.37)).toBe("slower");
    expect(intervalVerdict(0.9, 1.1)).toBe("no_gain");
    expect(intervalVerdict(0.5, Infinity)).toBe("no_gain");
  });

  // the recorded case of the issue: a diffusion trainer's pick (batch_size 4) measured interleaved
  // against the baseline at about a third of its samples/s
  const baselineRates = [2.42, 2.21];
  const winnerRates = [0.74, 0.72];
  const trials = [
    { index: 0, knobs: { batch_size: 16 }, purpose: "baseline" },
    { index: 1, knobs: { batch_size: 4 }, purpose: "halve" },
  ] as unknown as Parameters<typeof confirmationOutcome>[0]["trials"];
  const winner = { index: 1, knobs: { batch_size: 4 }, speedup: 1.3 };

  it("says your configuration is faster, with the interval, for a confirmed ×0.32 — never 'no gain beyond noise'", () => {
    const c = confirmSpeedup(baselineRates, winnerRates, [], 0.01);
    expect(c.verdict).toBe("slower");
    expect(c.high).toBeLessThan(1);
    const outcome = confirmationOutcome({ winner, trials }, c, 0.05);
    expect(outcome?.winner).toBeNull();
    expect(outcome?.confirmation?.verdict).toBe("slower");
    expect(outcome?.advice?.reason).toMatch(
      /^your configuration is faster: the best configuration the search found \(batch_size=4\) measured ×0\.3\d \(95 % interval ×0\.\d\d–×0\.\d\d\)/,
    );
    expect(outcome?.advice?.reason).not.toMatch(/noise/);
    // a pair whose interval holds 1.0 is still no gain beyond noise
    const held = confirmationOutcome({ winner, trials }, confirmSpeedup([100, 100], [160, 90], [], 0.01), 0.05);
    expect(held?.confirmation?.verdict).toBe("no_gain");
    expect(held?.advice?.reason).toMatch(/^no gain beyond noise/);
  });

  it("stops after two pairs once a slowdown is measured (no third pair to hunt for noise)", async () => {
    const order: string[] = [];
    const c = await confirmWinner(
      { batch_size: 16 },
      { batch_size: 4 },
      (knobs: Knobs) => {
        order.push(String(knobs.batch_size));
        return Promise.resolve(ok(knobs.batch_size === 16 ? 2.3 : 0.73));
      },
      [],
      0.01,
      () => true,
    );
    expect(order).toEqual(["16", "4", "16", "4"]);
    expect(c?.verdict).toBe("slower");
  });

  it("carries the verdict into tune.json and the closing lines, with the interval", () => {
    const c = confirmSpeedup(baselineRates, winnerRates, [], 0.01);
    const outcome = confirmationOutcome({ winner, trials }, c, 0.05);
    const record = tuneSchema.parse({
      schema: "brim.tune/v1",
      id: "t1",
      command: ["python", "train.py"],
      cwd: "/tmp",
      bindings: [],
      ended_at: null,
      started_at: "2026-11-28T12:00:00Z",
      cap_bytes: 1e9,
      cap_scope: "ram",
      trials: [],
      winner: null,
      stop_reason: "converged",
      confirmation: outcome?.confirmation,
      no_winner: outcome?.advice,
    });
    expect(record.confirmation?.verdict).toBe("slower");
    const text = renderTuneTable(record, 120);
    expect(text).toMatch(/your configuration is faster: .*×0\.3\d \(95 % interval/);
    expect(text).not.toMatch(/no winner:|no gain beyond noise/);
  });
});
