/**
 * Reports as Markdown: tables, findings, and charts as image links to files beside the report.
 *
 * @module
 */
import type { Comparison } from "../analyze/compare.ts";
import type { DoctorReport, Finding } from "../analyze/doctor/index.ts";
import type { NumberRow, RunReportModel, TuneParityView, TuneReportModel } from "./model.ts";

/**
 * Where each chart's image lies, relative to the report (PNG when rendered, else SVG).
 *
 * @example
 * ```ts
 * const files: ChartFiles = new Map([["memory", { path: "charts/memory.png", title: "GPU memory against the cap" }]]);
 * ```
 */
export type ChartFiles = ReadonlyMap<string, { path: string; title: string }>;

function cell(text: string): string {
  return text.replace(/\|/g, "\\|").replace(/\r?\n/g, " ");
}

function table(rows: readonly NumberRow[]): string[] {
  return ["| | |", "|---|---|", ...rows.map((r) => `| ${cell(r.label)} | ${cell(r.value)} |`)];
}

function code(text: string): string {
  const ticks = text.includes("`") ? "``" : "`";
  return `${ticks}${ticks === "``" ? " " : ""}${text}${ticks === "``" ? " " : ""}${ticks}`;
}

/**
 * The before/after table as Markdown.
 *
 * @example
 * ```ts
 * comparisonMarkdown(model.comparison).join("\n");
 * ```
 */
export function comparisonMarkdown(c: Comparison): string[] {
  const out = [`| | ${cell(c.before.label)} | ${cell(c.after.label)} | change |`, "|---|---:|---:|---:|"];
  for (const r of c.rows)
    out.push(
      `| ${r.key === "speedup" ? "**speedup**" : cell(r.label)} | ${cell(r.before_text)} | ${r.key === "speedup" ? `**${cell(r.after_text)}**` : cell(r.after_text)} | ${cell(r.change)} |`,
    );
  for (const note of c.notes) out.push("", `> ${note}`);
  return out;
}

/**
 * One finding as Markdown: what, evidence, fix and the tune command that verifies it.
 *
 * @example
 * ```ts
 * findingMarkdown(report.findings[0], 1).join("\n");
 * ```
 */
export function findingMarkdown(f: Finding, n: number): string[] {
  const out = [`### ${n}. ${f.title}`, "", `**${f.severity}** severity · confidence **${f.confidence.level}** (${f.confidence.reason})`, "", f.summary, ""];
  if (f.evidence.length > 0) {
    out.push("Evidence:", "");
    for (const e of f.evidence) out.push(`- ${e.text}`);
    out.push("");
  }
  if (f.fix.steps.length > 0) {
    out.push(`Fix — ${f.fix.summary}:`, "");
    f.fix.steps.forEach((s, i) => out.push(`${i + 1}. ${s}`));
    out.push("");
  }
  if (f.verify !== null) out.push(`Verify on real trials: ${code(f.verify)}`, "");
  return out;
}

/**
 * The findings section of a doctor report as Markdown.
 *
 * @example
 * ```ts
 * doctorMarkdown(diagnose(meta, timeline)).join("\n");
 * ```
 */
export function doctorMarkdown(d: DoctorReport): string[] {
  const out: string[] = [];
  for (const note of d.notes) out.push(`> ${note}`, "");
  if (d.findings.length === 0) out.push("No findings: every check that could run passed.", "");
  d.findings.forEach((f, i) => out.push(...findingMarkdown(f, i + 1)));
  if (d.passed.length > 0) {
    out.push("Checks that passed:", "");
    for (const p of d.passed) out.push(`- ${p.check}: ${p.why}`);
    out.push("");
  }
  if (d.not_evaluated.length > 0) {
    out.push("Not evaluated:", "");
    for (const n of d.not_evaluated) out.push(`- ${n.check}: ${n.reason}`);
    out.push("");
  }
  return out;
}

function charts(model: { charts: readonly { id: string; title: string }[] }, files: ChartFiles): string[] {
  const out: string[] = [];
  for (const c of model.charts) {
    const f = files.get(c.id);
    if (f !== undefined) out.push(`![${f.title}](${f.path})`, "");
  }
  return out;
}

/**
 * Your configuration's loss and the winner's as Markdown: the caption, the speedup, the chart's image
 * and each run's mean loss over a few spans (read where the image does not show).
 *
 * @example
 * ```ts
 * parityMarkdown(model.parity, chartFiles).join("\n");
 * ```
 */
export function parityMarkdown(view: TuneParityView, files: ChartFiles): string[] {
  const out = [`### ${view.caption}`, ""];
  if (view.speedup !== null) out.push(view.speedup, "");
  const image = files.get(view.chart.id);
  if (image !== undefined) out.push(`![${image.title}](${image.path})`, "");
  const spans = view.spans;
  if (spans !== null) {
    out.push(`| mean loss over ${spans.head} | ${spans.spans.join(" | ")} |`, `|---|${spans.spans.map(() => "---:").join("|")}|`);
    out.push(`| yours | ${spans.yours.join(" | ")} |`, `| winner | ${spans.winner.join(" | ")} |`, "");
  }
  return out;
}

/**
 * A run report as Markdown.
 *
 * @example
 * ```ts
 * await writeFile("report.md", runMarkdown(model, chartFiles));
 * ```
 */
export function runMarkdown(model: RunReportModel, files: ChartFiles): string {
  const out = [`# brim report: ${model.title}`, "", ...table(model.facts), ""];
  if (model.comparison !== null) out.push("## Before and after", "", ...comparisonMarkdown(model.comparison), "");
  out.push("## Numbers", "", "Steady state: warm-up steps left out; definitions in docs/report.md.", "", ...table(model.numbers), "");
  out.push("## Findings", "", ...doctorMarkdown(model.doctor));
  out.push("## Charts", "", ...charts(model, files));
  return out.join("\n").replace(/\n{3,}/g, "\n\n");
}

/**
 * A tune report as Markdown.
 *
 * @example
 * ```ts
 * await writeFile("report.md", tuneMarkdown(model, chartFiles));
 * ```
 */
export function tuneMarkdown(model: TuneReportModel, files: ChartFiles): string {
  const out = [`# brim report: ${model.title}`, "", ...table(model.facts), ""];
  for (const note of model.notes) out.push(`> ${note}`, "");
  if (model.comparison !== null || model.parity !== null) out.push("## Before and after", "");
  if (model.comparison !== null) out.push(...comparisonMarkdown(model.comparison), "");
  if (model.parity !== null) out.push(...parityMarkdown(model.parity, files));
  out.push("## Trials", "", "| # | purpose | knobs | end | samples/s | peak | utilization | data wait |", "|---:|---|---|---|---:|---:|---:|---:|");
  for (const t of model.trials) {
    out.push(
      `| ${t.index}${t.winner ? " ★" : ""} | ${cell(t.purpose)} | ${cell(t.knobs)} | ${cell(t.end)} | ${t.samples_per_s} | ${t.peak} | ${t.utilization} | ${t.data_wait} |`,
    );
  }
  out.push("", "## Charts", "", ...charts(model, files));
  return out.join("\n").replace(/\n{3,}/g, "\n\n");
}
