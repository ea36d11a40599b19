import { describe, expect, it } from "vitest";
import type { TuneRecord } from "../../src/record/types.ts";
import { noWinnerAdvice } from "../../src/tune/record.ts";
import { failureOf } from "../../src/tune/trial.ts";

const run = { meta: { end: { cause: "ok", message: "" } }, job: { tail: [] } } as unknown as Parameters<typeof failureOf>[1];

describe("why a trial measured no throughput", () => {
  it("tells a job that ends on its own too soon (pytorch-lightning's bug-report model: one step) from one that reports no samples", () => {
    const soon = failureOf("no_steps", run, null, 120, null, 1, 1);
    expect(soon.cause).toBe(
      "the job ended on its own after 1 step: too few to measure (the first are warm-up, then two steady steps at least); let it run longer (more batches or epochs)",
    );
    expect(failureOf("no_steps", run, null, 120, null, 40, 0).cause).toMatch(/^the job ran but reported no steady step with samples/);
    const trials = [{ index: 0, knobs: {}, purpose: "baseline", end: "no_steps", failure: soon }] as unknown as TuneRecord["trials"];
    expect(noWinnerAdvice(trials, "converged", "1 GiB")).toEqual({
      reason: `your configuration (trial 0): ${soon.cause}`,
      next: "make the job run more steps, then tune again",
    });
  });
});
