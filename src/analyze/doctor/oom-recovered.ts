/**
 * The `oom_recovered` check of `brim doctor` (docs/doctor.md).
 *
 * @module
 */
import type { KnobTrial } from "../tune-hint.ts";
import { type EventEntry } from "../../record/timeline/index.ts";
import { ev, finding, type CheckResult, type Ctx } from "./context.ts";

export function oomRecovered(ctx: Ctx): CheckResult {
  const events = ctx.tl.events.filter((e) => e.event === "oom_recovered");
  const count = ctx.tl.eventCounts.oom_recovered ?? 0;
  if (count === 0 || events.length === 0) return { check: "oom_recovered", why: "no out-of-memory recoveries" };
  const last = events[events.length - 1] as EventEntry;
  const mbNow = typeof last.details.micro_batch === "number" ? last.details.micro_batch : null;
  const batch = typeof last.details.batch === "number" ? last.details.batch : null;
  const split = typeof last.details.split === "number" ? last.details.split : null;
  const acc = typeof last.details.accumulation === "number" ? last.details.accumulation : null;
  const evidence = [
    ev(
      "out-of-memory recoveries",
      count,
      "count",
      `${count} step${count === 1 ? " ran out of memory and was" : "s ran out of memory and were"} retried in smaller chunks (first at step ${events[0]?.step ?? "?"})`,
    ),
  ];
  if (batch !== null && mbNow !== null)
    evidence.push(
      ev("micro-batch after recovery", mbNow, "count", `batch ${batch} now runs as ${split ?? "?"} chunks of ≤ ${mbNow} (accumulation ${acc ?? "?"})`),
    );
  const knobs: KnobTrial[] =
    mbNow !== null && batch !== null
      ? [{ name: "batch_size", values: [...new Set([mbNow, Math.round((mbNow + batch) / 2), batch])].sort((a, b) => a - b) }]
      : [];
  return finding(ctx, {
    id: "oom_recovered",
    title: "Micro-batch too large for memory",
    severity: "medium",
    confidence: { level: "high", reason: "the SDK reported each recovery" },
    summary: `The configured micro-batch does not fit: ${count} step${count === 1 ? " ran out of memory and was" : "s ran out of memory and were"} split. Each recovery costs a failed attempt.`,
    evidence,
    fix: {
      summary: "configure the micro-batch that fits",
      steps: [
        mbNow !== null && batch !== null
          ? `Set the micro-batch to ${mbNow} and multiply accumulation by ${split ?? batch / mbNow}: the same effective batch with no failed attempts.`
          : "Lower the micro-batch and raise accumulation by the same factor.",
        "Or lower memory per sample: bf16-mixed / fp16-mixed, activation checkpointing.",
      ],
    },
    knobs,
  });
}
