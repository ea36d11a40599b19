/**
 * The `memory_unused` check of `brim doctor` (docs/doctor.md).
 *
 * @module
 */
import { formatBytes } from "../../bytes.ts";
import { formatShare } from "../../format.ts";
import * as T from "../thresholds.ts";
import type { KnobTrial } from "../tune-hint.ts";
import { ev, finding, lower, powersUpTo, stepsConfidence, suggestedMicroBatch, type CheckResult, type Ctx } from "./context.ts";
import type { Evidence } from "./types.ts";

export function memoryUnused(ctx: Ctx): CheckResult {
  const { m } = ctx;
  if (!ctx.gpu) return { check: "memory_unused", reason: "CPU run: GPU memory does not apply (RAM use is under cpu_run)" };
  const peak = m.peak_tree_gpu_bytes ?? m.framework_peak_reserved_bytes;
  const source = m.peak_tree_gpu_bytes !== null ? "NVML, summed over the process tree" : "PyTorch's reserved peak (NVML per-process memory was not recorded)";
  if (peak === null) return { check: "memory_unused", reason: "no GPU memory was recorded for the job" };
  if (m.memory_limit_bytes === null) return { check: "memory_unused", reason: "neither a cap nor the card's total memory is known" };
  const share = peak / m.memory_limit_bytes;
  const limitName = m.memory_limit_source === "cap" ? "the cap" : "the card's memory";
  if (m.oom_recoveries > 0) return { check: "memory_unused", why: `the run ran out of memory ${m.oom_recoveries} time(s): memory is not to spare` };
  if (share >= T.MEMORY_USED_SHARE_LOW) return { check: "memory_unused", why: `peak ${formatBytes(peak)} is ${formatShare(share)} of ${limitName}` };
  const mb = m.micro_batch;
  const acc = m.accumulation ?? 1;
  const fit = suggestedMicroBatch(m);
  const evidence: Evidence[] = [
    ev("peak GPU memory", peak, "bytes", `peak ${formatBytes(peak)} (${source})`),
    ev("memory limit", m.memory_limit_bytes, "bytes", `${limitName}: ${formatBytes(m.memory_limit_bytes)}`),
    ev("share used", share, "share", `the job used ${formatShare(share)} of ${limitName} at its peak`),
  ];
  if (m.framework_peak_allocated_bytes !== null)
    evidence.push(
      ev("framework peak allocated", m.framework_peak_allocated_bytes, "bytes", `PyTorch's tensors peaked at ${formatBytes(m.framework_peak_allocated_bytes)}`),
    );
  if (mb !== null) evidence.push(ev("micro-batch", mb, "count", `micro-batch ${mb} × accumulation ${acc}`));
  const steps: string[] = [];
  const knobs: KnobTrial[] = [];
  if (mb !== null && fit !== null && fit > mb) {
    const factor = Math.max(1, Math.floor(fit / mb));
    let k = 1;
    while (k * 2 <= factor && acc % (k * 2) === 0) k *= 2;
    if (acc > 1 && k > 1) {
      steps.push(
        `Raise the micro-batch from ${mb} to ${mb * k} and lower accumulation from ${acc} to ${acc / k}: the same effective batch (${mb * acc}) in fewer, larger steps.`,
      );
      knobs.push({ name: "batch_size", values: powersUpTo(mb, mb * k, 4) }, { name: "accumulation", values: powersUpTo(acc / k, acc, 4).reverse() });
    } else {
      steps.push(
        `Raise the micro-batch from ${mb} toward ${fit} (a conservative estimate: the whole peak scaled with the batch, ${formatShare(T.MEMORY_MARGIN)} kept free); scale the learning rate with the batch if the effective batch changes.`,
      );
      knobs.push({ name: "batch_size", values: powersUpTo(mb, fit, 4) });
    }
  } else {
    steps.push("Raise the micro-batch (batch_size) and lower accumulation to keep the effective batch.");
  }
  steps.push("Let brim find the largest micro-batch that fits on real trials: brim tune measures peak memory per trial and fits a memory line.");
  const c = stepsConfidence(ctx.m.steady_steps);
  return finding(ctx, {
    id: "memory_unused",
    title: "GPU memory left unused",
    severity: (m.gpu_util_mean !== null && m.gpu_util_mean < T.UTIL_BUSY) || (m.sm_activity_mean ?? 100) <= T.SM_ACTIVITY_LOW ? "medium" : "low",
    confidence: {
      level: m.peak_tree_gpu_bytes !== null ? lower("high", c.level === "low" ? "medium" : "high") : "medium",
      reason:
        m.peak_tree_gpu_bytes !== null
          ? "peak measured by NVML over the whole process tree"
          : "peak from PyTorch's allocator only; the CUDA context and other processes are not counted",
    },
    summary: `At its peak the job held ${formatBytes(peak)} of ${formatBytes(m.memory_limit_bytes)} (${formatShare(share)}); a larger micro-batch would use the card better.`,
    evidence,
    fix: { summary: "use the memory for larger micro-batches", steps },
    knobs,
  });
}
