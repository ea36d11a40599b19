/**
 * The `launch_bound` check of `brim doctor` (docs/doctor.md).
 *
 * @module
 */
import { formatPercent, formatSeconds } from "../../format.ts";
import * as T from "../thresholds.ts";
import { ev, finding, lower, powersUpTo, stepsConfidence, suggestedMicroBatch, type CheckResult, type Ctx } from "./context.ts";
import type { Certainty, Evidence } from "./types.ts";

export function launchBound(ctx: Ctx): CheckResult {
  const { m } = ctx;
  if (!ctx.gpu) return { check: "launch_bound", reason: "CPU run: there are no GPU kernels to judge" };
  if (m.gpu_util_mean === null && m.sm_activity_mean === null) {
    return { check: "launch_bound", reason: "the sampler recorded no GPU utilization (NVML utilization not available, e.g. on MIG)" };
  }
  const mb = m.micro_batch;
  const evidence: Evidence[] = [];
  let summary: string;
  let level: Certainty;
  let reason: string;
  if (m.sm_activity_mean !== null && m.gpu_util_mean !== null) {
    if (!(m.gpu_util_mean >= T.UTIL_BUSY && m.sm_activity_mean <= T.SM_ACTIVITY_LOW)) {
      return {
        check: "launch_bound",
        why: `utilization ${formatPercent(m.gpu_util_mean)} with SM activity ${formatPercent(m.sm_activity_mean)}: kernels fill the SMs`,
      };
    }
    evidence.push(
      ev("GPU utilization", m.gpu_util_mean, "percent", `NVML utilization ${formatPercent(m.gpu_util_mean)}: a kernel was running most of the time`),
    );
    evidence.push(
      ev(
        "SM activity",
        m.sm_activity_mean,
        "percent",
        `GPM SM activity ${formatPercent(m.sm_activity_mean)}: the running kernels kept only that share of the SMs busy`,
      ),
    );
    summary = `The GPU looks busy (${formatPercent(m.gpu_util_mean)} utilization) but its SMs are mostly idle (${formatPercent(m.sm_activity_mean)} SM activity): the kernels are too small to fill the card.`;
    const n = ctx.samples.length;
    level = n >= T.SAMPLES_FOR_CONFIDENCE ? "high" : "medium";
    reason = `measured SM activity (GPM) over ${n} readings`;
  } else {
    const compute = m.compute_time_s;
    const waitShare = m.data_wait_share ?? 0;
    if (compute === null) return { check: "launch_bound", reason: "no steady step reports: step times are needed to judge step size without SM activity" };
    if (!(compute < T.SHORT_STEP_S && waitShare < T.DATA_WAIT_SHARE)) {
      return {
        check: "launch_bound",
        why: `median compute ${formatSeconds(compute)} per step (not below ${formatSeconds(T.SHORT_STEP_S)}); SM activity not recorded`,
      };
    }
    evidence.push(
      ev(
        "median compute per step",
        compute,
        "s",
        `a step computes for ${formatSeconds(compute)} (median): a few hundred kernel launches at 5–20 µs each take that long on their own`,
      ),
    );
    if (m.gpu_util_mean !== null) evidence.push(ev("GPU utilization", m.gpu_util_mean, "percent", `NVML utilization ${formatPercent(m.gpu_util_mean)}`));
    summary = `Steps are very short (${formatSeconds(compute)} of compute): launching kernels and Python between them take as long as the kernels.`;
    level = lower(stepsConfidence(m.steady_steps).level, "medium");
    reason = "judged from step time alone: SM activity (GPM, Hopper and newer) was not recorded";
  }
  if (mb !== null) evidence.push(ev("micro-batch", mb, "count", `micro-batch ${mb}`));
  const limit = suggestedMicroBatch(m);
  const values = mb === null ? [] : powersUpTo(mb, limit ?? mb * 8, 4);
  return finding(ctx, {
    id: "launch_bound",
    title: "Small, launch-bound steps",
    severity: "medium",
    confidence: { level, reason },
    summary,
    evidence,
    fix: {
      summary: "give each kernel more work, and launch fewer of them",
      steps: [
        mb === null
          ? "Raise the micro-batch (batch_size)."
          : `Raise the micro-batch from ${mb} to ${values.slice(1).join(" or ") || mb * 2}${limit !== null ? ` (memory allows about ${limit})` : ""}; lower accumulation to keep the effective batch.`,
        'Capture the step in a CUDA graph: torch.compile(model, mode="reduce-overhead"), or torch.cuda.graphs for a static step.',
        "torch.compile(model) also fuses small element-wise kernels.",
        "Remove per-step host syncs (loss.item(), printing tensors) from the loop.",
      ],
    },
    knobs: values.length > 1 ? [{ name: "batch_size", values }] : [],
  });
}
