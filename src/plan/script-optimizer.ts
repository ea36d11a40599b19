/**
 * The optimizer a script plan models, from what the job's footprint showed (`brim plan -- <command>`):
 * its torch.optim classes and the state they held, or `--optimizer`.
 *
 * @module
 */
import type { Optimizer } from "./spec.ts";

/** What the plan models when the job created no torch.optim optimizer: brim plan's default, 2 states per parameter. */
export const UNSEEN_OPTIMIZER: Optimizer = "adamw";

/**
 * The optimizer the planner should model, from the classes the job created and the state they
 * held per trainable parameter (measured): 2 states → adam(w), 1 → sgd-momentum, none → sgd. A job
 * that created no torch.optim optimizer has one brim cannot see (Keras's own, optax, a hand-written
 * update): that is {@link UNSEEN_OPTIMIZER}, never sgd, since nothing says it holds no state.
 *
 * @example
 * ```ts
 * optimizerOf(["AdamW"], 8 * 1000, 1000); // "adamw"
 * optimizerOf([], 0, 1000); // "adamw" (none seen: a Keras Adam, say)
 * ```
 */
export function optimizerOf(classes: readonly string[], stateBytes: number, trainable: number): Optimizer {
  if (classes.length === 0 && stateBytes === 0) return UNSEEN_OPTIMIZER;
  const perParam = trainable > 0 ? stateBytes / (4 * trainable) : 0;
  const names = classes.map((c) => c.toLowerCase());
  if (names.some((n) => n.includes("8bit"))) return "adamw-8bit";
  if (names.some((n) => n.includes("adafactor"))) return "adafactor";
  if (perParam >= 1.5) return names.some((n) => n === "adam") ? "adam" : "adamw";
  if (perParam >= 0.5) return "sgd-momentum";
  if (stateBytes === 0 && names.some((n) => n.startsWith("adam"))) return "adamw";
  return "sgd";
}

/** Where a script plan's optimizer comes from: seen (the job's torch.optim classes and state), unseen (none created: {@link UNSEEN_OPTIMIZER}), or given with --optimizer. */
export type OptimizerFrom = "seen" | "unseen" | "--optimizer";

/**
 * The optimizer to plan and where it comes from: `given` (--optimizer) wins, else {@link optimizerOf}.
 *
 * @example
 * ```ts
 * scriptOptimizer([], 0, 1000); // { optimizer: "adamw", from: "unseen" }
 * ```
 */
export function scriptOptimizer(
  classes: readonly string[],
  stateBytes: number,
  trainable: number,
  given?: Optimizer,
): { optimizer: Optimizer; from: OptimizerFrom } {
  if (given !== undefined) return { optimizer: given, from: "--optimizer" };
  return { optimizer: optimizerOf(classes, stateBytes, trainable), from: classes.length === 0 && stateBytes === 0 ? "unseen" : "seen" };
}

/**
 * How the optimizer state's term of a script plan was had, in one line.
 *
 * @example
 * ```ts
 * optimizerProvenance(["AdamW"], 8000, "adamw", "seen").how; // "AdamW: 8000 B of state held after a step; planned as adamw"
 * ```
 */
export function optimizerProvenance(
  classes: readonly string[],
  stateBytes: number,
  optimizer: Optimizer,
  from: OptimizerFrom,
): { provenance: "measured" | "modelled"; how: string } {
  if (from === "seen") return { provenance: "measured", how: `${classes.join(", ")}: ${stateBytes} B of state held after a step; planned as ${optimizer}` };
  if (from === "unseen")
    return {
      provenance: "modelled",
      how: `the job created no torch.optim optimizer (Keras's own, optax or a hand-written update are not seen): planned as ${optimizer}, 2 states per parameter; give --optimizer to plan the job's own`,
    };
  return { provenance: "modelled", how: `planned as ${optimizer} (--optimizer); the job's: ${classes.join(", ") || "none seen"}` };
}
