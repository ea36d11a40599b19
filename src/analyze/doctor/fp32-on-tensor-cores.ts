/**
 * The `fp32_on_tensor_cores` check of `brim doctor` (docs/doctor.md).
 *
 * @module
 */
import { formatPercent } from "../../format.ts";
import * as T from "../thresholds.ts";
import { ev, finding, type CheckResult, type Ctx } from "./context.ts";
import type { Evidence } from "./types.ts";

export function fp32OnTensorCores(ctx: Ctx): CheckResult {
  const { m } = ctx;
  if (!ctx.gpu || m.gpu === null) return { check: "fp32_on_tensor_cores", reason: "CPU run: tensor cores do not apply" };
  if (m.gpu.tensor_cores === null) return { check: "fp32_on_tensor_cores", reason: `brim does not know whether ${m.gpu.name} has tensor cores` };
  if (m.precision === null) {
    return {
      check: "fp32_on_tensor_cores",
      reason: 'the job did not report its precision: read it with brim.knob("precision", ...) (or pass it as a knob) so brim can see it',
    };
  }
  if (!m.gpu.tensor_cores) return { check: "fp32_on_tensor_cores", why: `${m.gpu.name} has no tensor cores` };
  if (m.precision !== "fp32") return { check: "fp32_on_tensor_cores", why: `the job trains in ${m.precision}` };
  const target = m.gpu.bf16 === true ? "bf16-mixed" : "fp16-mixed";
  const arch = m.gpu.architecture ?? "?";
  const evidence: Evidence[] = [
    ev(
      "precision",
      m.precision,
      "text",
      `precision fp32 (${m.precision_source === "knob_read" ? "as the job read its `precision` knob" : m.precision_source === "run_knobs" ? "from the run's knobs" : m.precision_source === "steps" ? "what its steps ran in: no autocast, fp32 parameters" : "after a fallback"})`,
    ),
    ev("GPU", m.gpu.name, "text", `${m.gpu.name} (${arch}) has tensor cores${m.gpu.bf16 === true ? " with bf16" : ""}`),
  ];
  if (m.gpu_util_mean !== null)
    evidence.push(
      ev(
        "GPU utilization",
        m.gpu_util_mean,
        "percent",
        `utilization ${formatPercent(m.gpu_util_mean)}: ${m.gpu_util_mean >= T.UTIL_BUSY ? "compute-bound, so faster maths shows directly" : "the gain shows once the GPU is kept busy"}`,
      ),
    );
  const steps = [
    `Train in ${target}: training.precision: ${target} (knob precision), or torch.autocast("cuda", dtype=torch.${target === "bf16-mixed" ? "bfloat16" : "float16"})${target === "fp16-mixed" ? " with a GradScaler" : ""}. Mixed precision also roughly halves activation memory.`,
  ];
  if (m.gpu.bf16 === true)
    steps.push("As a change with no numerical risk at all first: TF32 matmuls (torch.backends.cuda.matmul.allow_tf32 = True, knob tf32 / precision tf32).");
  if (m.gpu.bf16 !== true) steps.push(`${m.gpu.name} has no fast bf16: use fp16-mixed with loss scaling (GradScaler); watch for non-finite losses.`);
  return finding(ctx, {
    id: "fp32_on_tensor_cores",
    title: "fp32 on a card with tensor cores",
    severity: m.gpu_util_mean !== null && m.gpu_util_mean >= T.UTIL_BUSY ? "high" : "medium",
    confidence: {
      level: m.precision_source === "knob_read" || m.precision_source === "steps" ? "high" : "medium",
      reason:
        m.precision_source === "knob_read"
          ? "the job reported reading precision = fp32"
          : m.precision_source === "steps"
            ? "the attach saw the steps run without autocast on fp32 parameters"
            : "precision from the run's knobs; the job did not confirm reading it",
    },
    summary: `The job trains in plain fp32 on ${m.gpu.name}, whose tensor cores run ${target} matmuls many times faster.`,
    evidence,
    fix: { summary: `switch to ${target}`, steps },
    knobs: [{ name: "precision", values: m.gpu.bf16 === true ? ["fp32", "tf32", "bf16-mixed"] : ["fp32", "fp16-mixed"] }],
  });
}
