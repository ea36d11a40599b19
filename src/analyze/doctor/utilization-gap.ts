/**
 * The `utilization_gap` check of `brim doctor` (docs/doctor.md).
 *
 * @module
 */
import { formatPercent, formatShare } from "../../format.ts";
import * as T from "../thresholds.ts";
import { ev, finding, lower, powersUpTo, stepsConfidence, suggestedMicroBatch, type CheckResult, type Ctx } from "./context.ts";
import type { Certainty, Evidence } from "./types.ts";

export function utilizationGap(ctx: Ctx): CheckResult {
  const { m } = ctx;
  if (!ctx.gpu) return { check: "utilization_gap", reason: "CPU run: GPU utilization does not apply" };
  if (m.gpu_util_mean === null) return { check: "utilization_gap", reason: "the sampler recorded no GPU utilization" };
  const u = m.gpu_util_mean;
  const sm = m.sm_activity_mean;
  if (u >= 95 && (sm === null || sm > T.SM_ACTIVITY_LOW)) return { check: "utilization_gap", why: `utilization ${formatPercent(u)}` };
  const evidence: Evidence[] = [ev("GPU utilization", u, "percent", `NVML: a kernel ran ${formatPercent(u)} of the time (over steady state)`)];
  let text: string;
  let hostBound = false;
  let level: Certainty = ctx.samples.length >= T.SAMPLES_FOR_CONFIDENCE ? "medium" : "low";
  const wall = m.steady_window === null ? 0 : m.steady_window[1] - m.steady_window[0];
  if (m.steady_steps > 0 && wall > 0) {
    const { wait_total_s: wait, compute_total_s: compute } = ctx.tl.measured;
    const outside = Math.max(0, wall - wait - compute);
    const idle = 100 - u;
    const waitPts = Math.min(idle, (100 * wait) / wall);
    const outsidePts = Math.min(idle - waitPts, (100 * outside) / wall);
    const insidePts = Math.max(0, idle - waitPts - outsidePts);
    hostBound = u < T.UTIL_LOW && insidePts >= idle / 2;
    evidence.push(
      ev("waiting for data", waitPts, "percent", `${waitPts.toFixed(0)} points: the loop waited for the next batch ${formatShare(wait / wall)} of the time`),
    );
    if (outsidePts >= 1)
      evidence.push(
        ev(
          "between steps",
          outsidePts,
          "percent",
          `${outsidePts.toFixed(0)} points: time between steps outside the loop (evaluation, checkpoints, logging), ${formatShare(outside / wall)} of the time`,
        ),
      );
    evidence.push(
      ev(
        "inside steps",
        insidePts,
        "percent",
        `${insidePts.toFixed(0)} points: gaps between kernels inside the steps (Python, kernel launches, host syncs, CPU work)`,
      ),
    );
    const segments = [`about ${waitPts.toFixed(0)} to waiting for the next batch`];
    if (outsidePts >= 1) segments.push(`${outsidePts.toFixed(0)} to time between steps, outside the training loop`);
    segments.push(`${insidePts.toFixed(0)} to gaps inside the steps (Python between kernels, launches, host syncs)`);
    const joined = segments.length === 2 ? segments.join(" and ") : `${segments.slice(0, -1).join(", ")} and ${segments[segments.length - 1] ?? ""}`;
    text = `The GPU ran kernels ${formatPercent(u)} of the time. Of the ${idle.toFixed(0)} points it sat idle, ${joined}.`;
    if ((100 * compute) / wall < u - 5) text += " GPU work overlapped the waits, so these shares are approximate.";
    level = lower(level, stepsConfidence(m.steady_steps).level);
  } else {
    text = `The GPU ran kernels ${formatPercent(u)} of the time; without step reports brim cannot say where the idle time went.`;
    level = "low";
  }
  if (sm !== null) {
    evidence.push(ev("SM activity", sm, "percent", `GPM: while kernels ran, ${formatPercent(sm)} of the SMs were busy on average`));
    text += ` And "utilization" only says a kernel was running: SM activity was ${formatPercent(sm)}, so ${sm <= T.SM_ACTIVITY_LOW ? "most of the card sat idle even then" : "the kernels used the card reasonably"}.`;
  } else {
    text += " (Utilization only says a kernel was running, not how much of the card it used; SM activity was not recorded.)";
  }
  const mb = m.micro_batch;
  const values = mb === null ? [] : powersUpTo(mb, suggestedMicroBatch(m) ?? mb * 4, 3);
  return finding(ctx, {
    id: "utilization_gap",
    title: "Why utilization is not 100 %",
    severity: hostBound ? "medium" : "info",
    confidence: { level, reason: `NVML utilization is averaged over 1/6–1 s windows; ${ctx.samples.length} readings aligned with ${m.steady_steps} steps` },
    summary: text,
    evidence,
    fix: hostBound
      ? {
          summary: "the GPU waits for the host inside the steps: less Python per kernel",
          steps: [
            "Remove per-step host syncs: loss.item(), printing or logging tensors every step, .cpu() of outputs.",
            'Capture the step: torch.compile(model) fuses small kernels; mode="reduce-overhead" adds CUDA graphs.',
            mb === null ? "Raise the micro-batch so each kernel has more work." : `Raise the micro-batch (${values.join(" → ")}) so each kernel has more work.`,
          ],
        }
      : { summary: "follow the findings above for the largest share", steps: [] },
    knobs: hostBound && values.length > 1 ? [{ name: "batch_size", values }] : [],
  });
}
