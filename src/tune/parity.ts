/**
 * Loss parity: does the winner train the same model as your configuration? When the winner holds
 * the effective batch, the same seed and data order give the same losses step by step, within what
 * the precision allows; the first step where they part, and by how much, is what a user needs before
 * applying a change to a week-long run. Pure: the losses come from the confirmation's own runs.
 *
 * @module
 */

/** How far two losses of one step may differ, relative to the loss (at least 1), by precision. */
export const PARITY_TOLERANCE: Readonly<Record<string, number>> = {
  fp32: 1e-4,
  tf32: 5e-3,
  "bf16-mixed": 3e-2,
  "fp16-mixed": 1e-2,
};

/** Steps compared at most: the first optimizer steps, where a difference has not yet been amplified by training. */
export const PARITY_STEPS = 20;

/** A step's loss as the timeline keeps it: a number, a non-finite word ("nan", "inf", "-inf"), or null when unknown. */
export type StepLoss = number | string | null;

/** What the comparison found. */
export type Parity =
  | { verdict: "match"; steps: number; tolerance: number; max_diff: number }
  | { verdict: "parted"; steps: number; tolerance: number; step: number; baseline: number | string; winner: number | string; diff: number | null }
  | { verdict: "nonfinite"; step: number; winner: string; precision: string }
  | { verdict: "not_comparable"; reason: string };

const toleranceOf = (precisions: readonly string[]): number => Math.max(...precisions.map((p) => PARITY_TOLERANCE[p] ?? PARITY_TOLERANCE["fp32"] ?? 1e-4));

/**
 * Compares the first {@link PARITY_STEPS} step losses of your configuration's run and the winner's,
 * both from step 0. A winner that changes the effective batch is not comparable step by step (its
 * steps see other samples), and neither is a run whose losses brim could not read.
 *
 * @example
 * ```ts
 * lossParity([2.3, 2.1, 1.9], [2.3, 2.1, 1.9000001], { baseline: "fp32", winner: "fp32" }, true);
 * // { verdict: "match", steps: 3, tolerance: 0.0001, max_diff: 1e-7 }
 * ```
 */
export function lossParity(
  baseline: readonly StepLoss[],
  winner: readonly StepLoss[],
  precision: { baseline: string; winner: string },
  effectiveBatchHeld: boolean,
): Parity {
  if (!effectiveBatchHeld)
    return { verdict: "not_comparable", reason: "the winner changes the effective batch: its steps see other samples, so losses differ by design" };
  const steps = Math.min(baseline.length, winner.length, PARITY_STEPS);
  if (steps === 0) return { verdict: "not_comparable", reason: "brim read no loss in one of the two runs" };
  const tolerance = toleranceOf([precision.baseline, precision.winner]);
  let maxDiff = 0;
  for (let step = 0; step < steps; step++) {
    const a = baseline[step] ?? null;
    const b = winner[step] ?? null;
    if (a === null || b === null) return { verdict: "not_comparable", reason: `brim read no loss at step ${step} of one of the two runs` };
    if (typeof b === "string" && typeof a !== "string") return { verdict: "nonfinite", step, winner: b, precision: precision.winner };
    if (typeof a === "string" || typeof b === "string") {
      if (a === b) continue;
      return { verdict: "parted", steps, tolerance, step, baseline: a, winner: b, diff: null };
    }
    const diff = Math.abs(a - b) / Math.max(1, Math.abs(a));
    if (diff > tolerance) return { verdict: "parted", steps, tolerance, step, baseline: a, winner: b, diff };
    maxDiff = Math.max(maxDiff, diff);
  }
  return { verdict: "match", steps, tolerance, max_diff: maxDiff };
}

/**
 * The verdict's line for a parity result.
 *
 * @example
 * ```ts
 * parityLine({ verdict: "match", steps: 20, tolerance: 1e-4, max_diff: 3e-7 });
 * // "same model: the first 20 steps' losses match your configuration's within 1e-4 (largest difference 3e-7)"
 * ```
 */
export function parityLine(parity: Parity): string {
  const sci = (x: number): string => (x === 0 ? "0" : x.toExponential(0).replace("e+", "e"));
  switch (parity.verdict) {
    case "match":
      return `same model: the first ${parity.steps} steps' losses match your configuration's within ${sci(parity.tolerance)} (largest difference ${sci(parity.max_diff)})`;
    case "parted": {
      const value = (v: number | string): string => (typeof v === "number" ? v.toPrecision(6) : v);
      const by = parity.diff !== null ? `, ${(parity.diff * 100).toPrecision(2)} % apart (tolerance ${sci(parity.tolerance)})` : "";
      return `not the same losses: they part at step ${parity.step} (yours ${value(parity.baseline)}, the winner's ${value(parity.winner)}${by}): the winner changes what the model sees or computes, beyond the speed`;
    }
    case "nonfinite":
      return `the winner's loss is ${parity.winner} at step ${parity.step} under ${parity.precision}: not safe to apply (keep your precision, or bf16-mixed where the GPU has it)`;
    case "not_comparable":
      return `losses not compared step by step: ${parity.reason}`;
  }
}
