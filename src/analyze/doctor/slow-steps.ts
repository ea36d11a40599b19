/**
 * The `slow_steps` check of `brim doctor` (docs/doctor.md): steps far slower than the steady median,
 * such as `torch.compile`'s or XLA's compilation at the start, or a recompilation later.
 *
 * @module
 */
import { formatSeconds } from "../../format.ts";
import * as T from "../thresholds.ts";
import { mainSteps, stepSeconds } from "../../record/timeline/index.ts";
import { median } from "../../stats.ts";
import { ev, finding, type CheckResult, type Ctx } from "./context.ts";

export function slowSteps(ctx: Ctx): CheckResult {
  const timed = mainSteps(ctx.tl)
    .map((s, i) => ({ i, warmup: s.warmup, seconds: stepSeconds(s) }))
    .filter((s): s is { i: number; warmup: boolean; seconds: number } => s.seconds !== null);
  const medianS = median(timed.filter((s) => !s.warmup).map((s) => s.seconds));
  if (medianS === null) return { check: "slow_steps", reason: "no timed steady step" };
  const slow = timed.filter((s) => s.seconds >= T.SLOW_STEP_RATIO * medianS && s.seconds - medianS >= T.SLOW_STEP_MIN_EXTRA_S);
  const times = timed.map((s) => s.seconds);
  const range = `steps took ${formatSeconds(Math.min(...times))} to ${formatSeconds(Math.max(...times))}, median ${formatSeconds(medianS)} over the steady ones`;
  if (slow.length === 0) return { check: "slow_steps", why: `${range}: none ${T.SLOW_STEP_RATIO}× the median` };
  const slowest = Math.max(...slow.map((s) => s.seconds));
  const steady = slow.filter((s) => !s.warmup);
  const leading = slow.every((s, k) => s.i === k); // the slow steps are the first ones
  const lastSlow = Math.max(...slow.map((s) => s.i)) + 1;
  const evidence = [
    ev("step time range", `${formatSeconds(Math.min(...times))}–${formatSeconds(Math.max(...times))}`, "text", range),
    ev(
      "slow steps",
      slow.length,
      "count",
      `${slow.length} step${slow.length === 1 ? "" : "s"} of ≥ ${T.SLOW_STEP_RATIO}× the median (step${slow.length === 1 ? "" : "s"} ${slow.map((s) => s.i + 1).join(", ")}), the slowest ${formatSeconds(slowest)}; ${steady.length === 0 ? "all of them warm-up, left out of throughput" : `${steady.length} of them counted in throughput`}`,
    ),
  ];
  const cause = "compilation (torch.compile, XLA's jit), cuDNN autotuning or the first touch of memory";
  if (steady.length === 0)
    return finding(ctx, {
      id: "slow_steps",
      title: "Slow first steps: warm-up, left out of throughput",
      severity: "info",
      confidence: { level: "high", reason: "step times measured one by one" },
      summary: `The first steps took up to ${formatSeconds(slowest)} against a steady ${formatSeconds(medianS)}: ${cause}. They are warm-up steps, so the throughput figures leave them out.`,
      evidence,
      fix: { summary: "nothing to change", steps: ["Keep trials longer than the warm-up (brim tune counts it out of every trial)."] },
      knobs: [],
    });
  return finding(ctx, {
    id: "slow_steps",
    title: leading ? "Warm-up longer than the warm-up steps" : "Slow steps in steady state",
    severity: steady.reduce((n, s) => n + s.seconds, 0) >= 0.1 * medianS * timed.length ? "medium" : "low",
    confidence: { level: "high", reason: "step times measured one by one" },
    summary: leading
      ? `The first ${lastSlow} steps were slow (up to ${formatSeconds(slowest)} against a steady ${formatSeconds(medianS)}): ${cause}, lasting past the warm-up, so ${steady.length} of them count in throughput and lower it.`
      : `${steady.length} steady step${steady.length === 1 ? "" : "s"} took ≥ ${T.SLOW_STEP_RATIO}× the median (up to ${formatSeconds(slowest)}): a recompilation (torch.compile recompiles on a new input shape or dtype), a checkpoint save, evaluation inside the loop or a stalled loader.`,
    evidence,
    fix: leading
      ? {
          summary: `warm up for ${lastSlow} steps`,
          steps: [`brim run --warmup ${lastSlow} (and brim tune --warmup ${lastSlow}) so throughput counts compiled steps only.`],
        }
      : {
          summary: "find what the slow steps do",
          steps: [
            "With torch.compile: TORCH_LOGS=recompiles shows each recompilation and why; drop_last=True or torch.compile(dynamic=True) avoids one per new batch shape.",
            "Move checkpoint saves and evaluation out of the measured window, or accept them as part of the run's cost.",
          ],
        },
    knobs: [],
  });
}
