/**
 * The `nonfinite_loss` check of `brim doctor` (docs/doctor.md).
 *
 * @module
 */
import { minOf } from "../../stats.ts";
import type { KnobTrial } from "../tune-hint.ts";
import { type EventEntry } from "../../record/timeline/index.ts";
import { ev, finding, type CheckResult, type Ctx } from "./context.ts";
import type { Evidence } from "./types.ts";

export function nonfiniteLoss(ctx: Ctx): CheckResult {
  const nonfinite = ctx.tl.events.filter((e) => e.event === "nonfinite_loss");
  const fallbacks = ctx.tl.events.filter((e) => e.event === "precision_fallback");
  if (nonfinite.length === 0 && fallbacks.length === 0) return { check: "nonfinite_loss", why: "no non-finite losses and no precision fallback reported" };
  const evidence: Evidence[] = [];
  const precisionOf = (e: EventEntry | undefined): string | null =>
    e === undefined ? null : typeof e.details.precision === "string" ? e.details.precision : null;
  const from = typeof fallbacks[0]?.details.from === "string" ? fallbacks[0].details.from : precisionOf(nonfinite[0]);
  const unsupported = fallbacks.filter((e) => e.details.reason === "unsupported");
  const nanFallback = fallbacks.filter((e) => e.details.reason === "nonfinite_loss");
  if (nonfinite.length > 0) {
    const steps = nonfinite.map((e) => e.step).filter((s): s is number => s !== null);
    evidence.push(
      ev(
        "non-finite losses",
        nonfinite.length,
        "count",
        `${nonfinite.length} step${nonfinite.length === 1 ? "" : "s"} with a NaN/inf loss under ${precisionOf(nonfinite[0]) ?? "mixed precision"}${steps.length > 0 ? ` (first at step ${minOf(steps) ?? "?"})` : ""}; their gradients were dropped`,
      ),
    );
  }
  for (const f of fallbacks) {
    evidence.push(
      ev(
        "precision fallback",
        `${String(f.details.from)} → ${String(f.details.to)}`,
        "text",
        `at step ${f.step ?? "?"}: ${String(f.details.from)} fell back to ${String(f.details.to)} (${String(f.details.reason)})${f.message !== null ? `: ${f.message}` : ""}`,
      ),
    );
  }
  const bf16 = ctx.m.gpu?.bf16 ?? (ctx.gpu ? null : true);
  const steps: string[] = [];
  const knobs: KnobTrial[] = [];
  if (unsupported.length > 0 && nanFallback.length === 0 && nonfinite.length === 0) {
    const to = String(unsupported[0]?.details.to);
    steps.push(`Set the precision the device supports explicitly (precision: ${to}) so that the run's config says what actually runs.`);
    return finding(ctx, {
      id: "nonfinite_loss",
      title: "Precision not supported here",
      severity: "low",
      confidence: { level: "high", reason: "the SDK reported the fallback" },
      summary: `The requested ${from ?? "precision"} is not supported on this device; the SDK trained in ${to} instead.`,
      evidence,
      fix: { summary: `ask for ${to} directly`, steps },
      knobs,
    });
  }
  if (from === "fp16-mixed" && bf16 === true) {
    steps.push("Switch fp16-mixed to bf16-mixed: bf16 has fp32's exponent range, so losses and gradients do not overflow (no loss scaling needed).");
    knobs.push({ name: "precision", values: ["fp16-mixed", "bf16-mixed", "fp32"] });
  } else if (from === "fp16-mixed") {
    steps.push(
      "This device has no fast bf16: keep fp16-mixed with a GradScaler and find what overflows (softmax/exp in fp16, a large loss sum), or keep fp32 for the unstable part (autocast(enabled=False) around it).",
    );
    knobs.push({ name: "precision", values: ["fp16-mixed", "fp32"] });
  } else {
    steps.push(
      "Non-finite losses under bf16 usually come from the model, not the format: lower the learning rate, clip gradients (clip_grad_norm=1.0), check inputs for NaN.",
    );
    knobs.push({ name: "precision", values: [from ?? "bf16-mixed", "fp32"] });
  }
  if (nanFallback.length > 0)
    steps.push(
      `The run went on in ${String(nanFallback[0]?.details.to)} after the fallback: it trained correctly but at fp32 speed from step ${nanFallback[0]?.step ?? "?"}.`,
    );
  steps.push("If the losses stay finite in fp32 only, keep fp32 for the loss and the last layers (autocast disabled there) and mixed precision elsewhere.");
  return finding(ctx, {
    id: "nonfinite_loss",
    title: "Mixed precision losses went non-finite",
    severity: nanFallback.length > 0 || nonfinite.length >= 3 ? "high" : "medium",
    confidence: { level: "high", reason: "reported by the SDK from the job's own losses" },
    summary: `Under ${from ?? "mixed precision"} ${nonfinite.length} loss${nonfinite.length === 1 ? " was" : "es were"} NaN/inf${nanFallback.length > 0 ? `, and the SDK fell back to ${String(nanFallback[0]?.details.to)}` : ""}.`,
    evidence,
    fix: { summary: from === "fp16-mixed" && bf16 === true ? "use bf16-mixed" : "stabilise the numerics or fall back to fp32", steps },
    knobs,
  });
}
