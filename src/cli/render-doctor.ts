import type { DoctorReport, Finding } from "../analyze/doctor/index.ts";
import { formatMaybeBytes, formatPercent, formatRate, formatSeconds, formatShare, wrap } from "../format.ts";
import { doctorMarkdown } from "../report/markdown.ts";

/** The width doctor's prose is wrapped at. */
const WIDTH = 100;

function findingLines(f: Finding, n: number): string[] {
  const lines = [`${n}. ${f.title}  [${f.severity} severity · confidence ${f.confidence.level}]`];
  lines.push(...wrap(f.summary, WIDTH, "   "));
  if (f.evidence.length > 0) {
    lines.push("   evidence");
    for (const e of f.evidence) lines.push(...wrap(e.text, WIDTH, "       ").map((l, i) => (i === 0 ? `     - ${l.trimStart()}` : l)));
  }
  lines.push(...wrap(`how sure: ${f.confidence.level} — ${f.confidence.reason}`, WIDTH, "   "));
  if (f.fix.steps.length > 0) {
    lines.push(`   fix: ${f.fix.summary}`);
    f.fix.steps.forEach((s, i) => lines.push(...wrap(s, WIDTH, "        ").map((l, j) => (j === 0 ? `     ${i + 1}. ${l.trimStart()}` : l))));
  }
  if (f.verify !== null) lines.push(`   verify: ${f.verify}`);
  return lines;
}

/**
 * Renders a doctor report for the terminal.
 *
 * @example
 * ```ts
 * process.stdout.write(renderDoctorText(diagnose(meta, timeline)));
 * ```
 */
export function renderDoctorText(d: DoctorReport): string {
  const m = d.measures;
  const gpu = d.run.gpu;
  const lines = [`brim doctor · ${d.run.kind} ${d.run.id} · ${d.run.device} · ${d.run.running ? "running / unfinished" : `ended ${d.run.end ?? "?"}`}`];
  lines.push(`command   ${d.run.command.join(" ")}`);
  const measured = [
    `${formatRate(m.samples_per_s)} samples/s`,
    `data wait ${formatShare(m.data_wait_share)}`,
    `step ${formatSeconds(m.step_time_s)}`,
    gpu ? `GPU util ${formatPercent(m.gpu_util_mean)}` : `CPU ${formatPercent(m.tree_cpu_percent_mean)}`,
    gpu
      ? `peak ${formatMaybeBytes(m.peak_tree_gpu_bytes ?? m.framework_peak_reserved_bytes)} of ${formatMaybeBytes(m.memory_limit_bytes)}`
      : `peak RSS ${formatMaybeBytes(m.peak_tree_rss_bytes)}`,
    `micro-batch ${m.micro_batch ?? "?"} × ${m.accumulation ?? "?"}`,
    `precision ${m.precision ?? "?"}`,
  ];
  lines.push(`measured  ${measured.join(" · ")} (${m.steady_steps} steady steps)`);
  for (const note of d.notes) lines.push(...wrap(`note: ${note}`, WIDTH));
  lines.push("");
  if (d.findings.length === 0) lines.push("No findings: every check that could run passed.", "");
  d.findings.forEach((f, i) => lines.push(...findingLines(f, i + 1), ""));
  if (d.passed.length > 0) {
    lines.push("passed");
    for (const p of d.passed) lines.push(...wrap(`${p.check}: ${p.why}`, WIDTH, "    ").map((l, i) => (i === 0 ? `  - ${l.trimStart()}` : l)));
  }
  if (d.not_evaluated.length > 0) {
    lines.push("not evaluated");
    for (const n of d.not_evaluated) lines.push(...wrap(`${n.check}: ${n.reason}`, WIDTH, "    ").map((l, i) => (i === 0 ? `  - ${l.trimStart()}` : l)));
  }
  return lines.join("\n") + "\n";
}

/**
 * Renders a doctor report as Markdown.
 *
 * @example
 * ```ts
 * writeFileSync("DOCTOR.md", renderDoctorMarkdown(report));
 * ```
 */
export function renderDoctorMarkdown(d: DoctorReport): string {
  return [`# brim doctor: ${d.run.kind} ${d.run.id}`, "", `\`${d.run.command.join(" ")}\` on ${d.run.device}`, "", ...doctorMarkdown(d)].join("\n");
}
