/**
 * The `cpu_run` check of `brim doctor` (docs/doctor.md).
 *
 * @module
 */
import { formatBytes } from "../../bytes.ts";
import { formatPercent, formatRate, formatShare } from "../../format.ts";
import { ev, finding, type CheckResult, type Ctx } from "./context.ts";
import type { Evidence } from "./types.ts";

export function cpuRun(ctx: Ctx): CheckResult | null {
  if (ctx.gpu) return null;
  const { m } = ctx;
  const evidence: Evidence[] = [];
  if (m.data_wait_share !== null)
    evidence.push(ev("data wait share", m.data_wait_share, "share", `waiting for data: ${formatShare(m.data_wait_share)} of step time`));
  if (m.samples_per_s !== null)
    evidence.push(ev("throughput", m.samples_per_s, "samples/s", `${formatRate(m.samples_per_s)} samples/s over ${m.steady_steps} steady steps`));
  if (m.tree_cpu_percent_mean !== null) {
    const cores = m.host_cpus;
    evidence.push(
      ev(
        "CPU of the job's processes",
        m.tree_cpu_percent_mean,
        "percent",
        `the process tree used ${formatPercent(m.tree_cpu_percent_mean)} CPU (${(m.tree_cpu_percent_mean / 100).toFixed(1)} of ${cores ?? "?"} cores)`,
      ),
    );
  }
  const rss = m.peak_tree_rss_bytes;
  const cap = ctx.meta.cap_scope === "ram" ? ctx.meta.cap_bytes : null;
  if (rss !== null) {
    const against = cap ?? ctx.meta.device.host.mem_total_bytes;
    evidence.push(
      ev(
        "peak RSS",
        rss,
        "bytes",
        `peak RSS of the process tree ${formatBytes(rss)} of ${cap !== null ? "the cap" : "the host's memory"} ${formatBytes(against)} (${formatShare(rss / against)})`,
      ),
    );
  }
  const notes = [
    "launch-bound steps",
    "GPU memory left unused",
    "fp32 on tensor cores",
    "host-to-device traffic",
    "clocks held back",
    "GPU contexts",
    "why utilization is not 100 %",
  ];
  return finding(ctx, {
    id: "cpu_run",
    title: "CPU run: what can be said without a GPU",
    severity: "info",
    confidence: { level: "high", reason: "the run used no GPU (device backend cpu)" },
    summary: `This run trained on the CPU. Data wait, CPU use and RAM are measured; the GPU checks (${notes.join(", ")}) could not be evaluated and need a run on a GPU.`,
    evidence,
    fix: { summary: "run on a GPU to evaluate the GPU checks", steps: ["brim run -- <the same command> on a machine with a GPU, then brim doctor again."] },
    knobs: [],
  });
}
