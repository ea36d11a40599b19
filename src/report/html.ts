/**
 * Reports as one self-contained HTML file: inline CSS, inline SVG charts, no scripts, no external
 * assets. The pieces are exported for the dashboard, which shows the same sections.
 *
 * @module
 */
import type { Comparison } from "../analyze/compare.ts";
import type { DoctorReport, Finding } from "../analyze/doctor/index.ts";
import type { NumberRow, RunReportModel, TrialRow, TuneParityView, TuneReportModel } from "./model.ts";
import { escapeXml as esc, renderChart } from "./svg.ts";

/**
 * The stylesheet reports and dashboard pages share.
 *
 * @example
 * ```ts
 * `<style>${REPORT_CSS}</style>`;
 * ```
 */
export const REPORT_CSS = `
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1b1b1b; margin: 0; background: #f4f5f7; }
main { max-width: 1000px; margin: 0 auto; padding: 20px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 12px; } h2 { font-size: 17px; margin: 28px 0 10px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 0 0 6px; }
table { border-collapse: collapse; background: #fff; margin: 6px 0 12px; width: 100%; }
th, td { border: 1px solid #e0e0e0; padding: 5px 9px; text-align: left; vertical-align: top; }
th { background: #f0f2f5; font-weight: 600; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font: 12.5px ui-monospace, "DejaVu Sans Mono", monospace; background: #eef0f3; padding: 1px 4px; border-radius: 3px; word-break: break-all; }
.finding { background: #fff; border: 1px solid #e0e0e0; border-left: 5px solid #999; border-radius: 4px; padding: 12px 16px; margin: 10px 0; }
.finding.high { border-left-color: #C62828; } .finding.medium { border-left-color: #E69F00; } .finding.low { border-left-color: #0072B2; } .finding.info { border-left-color: #7a7a7a; }
.badge { display: inline-block; font-size: 12px; padding: 1px 7px; border-radius: 10px; background: #eee; margin-right: 6px; }
.badge.high { background: #fde0e0; } .badge.medium { background: #fff0cc; } .badge.low { background: #dbeafe; }
.muted { color: #666; } .note { background: #fffbe6; border: 1px solid #f0e0a0; padding: 6px 10px; border-radius: 4px; margin: 8px 0; }
.charts figure { background: #fff; border: 1px solid #e0e0e0; border-radius: 4px; margin: 10px 0; padding: 6px; overflow-x: auto; }
.charts svg { display: block; max-width: 100%; height: auto; }
tr.winner td { background: #eaf7ef; font-weight: 600; }
ul.compact { margin: 4px 0 8px; padding-left: 20px; }
`;

/**
 * A two-column table of labelled values.
 *
 * @example
 * ```ts
 * factsHtml([{ label: "device", value: "NVIDIA T4" }]);
 * ```
 */
export function factsHtml(rows: readonly NumberRow[]): string {
  return `<table class="facts"><tbody>${rows.map((r) => `<tr><th>${esc(r.label)}</th><td>${esc(r.value)}</td></tr>`).join("")}</tbody></table>`;
}

/**
 * The before/after table.
 *
 * @example
 * ```ts
 * comparisonHtml(model.comparison);
 * ```
 */
export function comparisonHtml(c: Comparison): string {
  const rows = c.rows
    .map(
      (r) =>
        `<tr data-key="${r.key}"><th>${esc(r.label)}</th><td class="num">${esc(r.before_text)}</td><td class="num">${r.key === "speedup" ? `<strong>${esc(r.after_text)}</strong>` : esc(r.after_text)}</td><td class="num">${esc(r.change)}</td></tr>`,
    )
    .join("");
  const notes = c.notes.map((n) => `<p class="note">${esc(n)}</p>`).join("");
  return `<table class="comparison"><thead><tr><th></th><th class="num">${esc(c.before.label)}</th><th class="num">${esc(c.after.label)}</th><th class="num">change</th></tr></thead><tbody>${rows}</tbody></table>${notes}`;
}

/**
 * One finding as an HTML card.
 *
 * @example
 * ```ts
 * findingHtml(report.findings[0]);
 * ```
 */
export function findingHtml(f: Finding): string {
  const evidence =
    f.evidence.length > 0 ? `<p><strong>Evidence</strong></p><ul class="compact">${f.evidence.map((e) => `<li>${esc(e.text)}</li>`).join("")}</ul>` : "";
  const fix =
    f.fix.steps.length > 0
      ? `<p><strong>Fix</strong> — ${esc(f.fix.summary)}</p><ol class="compact">${f.fix.steps.map((s) => `<li>${esc(s)}</li>`).join("")}</ol>`
      : "";
  const verify = f.verify !== null ? `<p><strong>Verify on real trials:</strong> <code>${esc(f.verify)}</code></p>` : "";
  return `<section class="finding ${f.severity}" data-finding="${esc(f.id)}"><h3>${esc(f.title)}</h3><p><span class="badge ${f.severity}">${esc(f.severity)} severity</span><span class="badge">confidence ${esc(f.confidence.level)}</span><span class="muted">${esc(f.confidence.reason)}</span></p><p>${esc(f.summary)}</p>${evidence}${fix}${verify}</section>`;
}

/**
 * A doctor report's findings, passed checks and checks not evaluated.
 *
 * @example
 * ```ts
 * doctorHtml(diagnose(meta, timeline));
 * ```
 */
export function doctorHtml(d: DoctorReport): string {
  const parts = d.notes.map((n) => `<p class="note">${esc(n)}</p>`);
  parts.push(d.findings.length === 0 ? `<p>No findings: every check that could run passed.</p>` : d.findings.map(findingHtml).join(""));
  if (d.passed.length > 0)
    parts.push(
      `<details><summary>Checks that passed (${d.passed.length})</summary><ul class="compact">${d.passed.map((p) => `<li><code>${esc(p.check)}</code> ${esc(p.why)}</li>`).join("")}</ul></details>`,
    );
  if (d.not_evaluated.length > 0)
    parts.push(
      `<details open><summary>Not evaluated (${d.not_evaluated.length})</summary><ul class="compact">${d.not_evaluated.map((n) => `<li><code>${esc(n.check)}</code> ${esc(n.reason)}</li>`).join("")}</ul></details>`,
    );
  return parts.join("");
}

/**
 * A tune's trial table.
 *
 * @example
 * ```ts
 * trialsHtml(model.trials, (id) => `/runs/${id}`);
 * ```
 */
export function trialsHtml(rows: readonly TrialRow[], link?: (runId: string) => string): string {
  const body = rows
    .map((t) => {
      const id = t.run_id !== null && link !== undefined ? `<a href="${esc(link(t.run_id))}">${t.index}</a>` : String(t.index);
      return `<tr class="${t.winner ? "winner" : ""}" data-trial="${t.index}"><td class="num">${id}${t.winner ? " ★" : ""}</td><td>${esc(t.purpose)}</td><td>${esc(t.knobs)}</td><td>${esc(t.end)}</td><td class="num">${esc(t.samples_per_s)}</td><td class="num">${esc(t.peak)}</td><td class="num">${esc(t.utilization)}</td><td class="num">${esc(t.data_wait)}</td></tr>`;
    })
    .join("");
  return `<table class="trials"><thead><tr><th class="num">#</th><th>purpose</th><th>knobs</th><th>end</th><th class="num">samples/s</th><th class="num">peak</th><th class="num">utilization</th><th class="num">data wait</th></tr></thead><tbody>${body}</tbody></table>`;
}

/**
 * Charts as figures with inline SVG.
 *
 * @example
 * ```ts
 * chartsHtml(model.charts.map((c) => ({ id: c.id, svg: renderChart(c) })));
 * ```
 */
export function chartsHtml(charts: readonly { id: string; svg: string }[]): string {
  return `<div class="charts">${charts.map((c) => `<figure data-chart-box="${esc(c.id)}">${c.svg}</figure>`).join("")}</div>`;
}

/**
 * Your configuration's loss and the winner's, under the speedup they stand beside: the caption, the
 * speedup and the chart.
 *
 * @example
 * ```ts
 * if (model.parity !== null) parts.push(parityHtml(model.parity));
 * ```
 */
export function parityHtml(view: TuneParityView): string {
  const speedup = view.speedup === null ? "" : `<p data-parity-speedup>${esc(view.speedup)}</p>`;
  return `<section data-parity><h3>${esc(view.caption)}</h3>${speedup}${chartsHtml([{ id: view.chart.id, svg: renderChart(view.chart) }])}</section>`;
}

/**
 * A whole HTML page around a body.
 *
 * @example
 * ```ts
 * htmlPage("Run 20261122-101500-3f2a", "<main>...</main>");
 * htmlPage("Run …", body, "", nonce); // style tags carry the CSP nonce
 * ```
 */
export function htmlPage(title: string, body: string, head = "", nonce?: string): string {
  const style = nonce === undefined ? "<style>" : `<style nonce="${esc(nonce)}">`;
  return `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${esc(title)}</title>${style}${REPORT_CSS}</style>${head}</head><body>${body}</body></html>\n`;
}

/**
 * A run report as a self-contained HTML page.
 *
 * @example
 * ```ts
 * await writeFile("report.html", runHtml(model));
 * ```
 */
export function runHtml(model: RunReportModel): string {
  const parts = [`<main><h1>brim report: ${esc(model.title)}</h1>`, factsHtml(model.facts)];
  if (model.comparison !== null) parts.push(`<h2>Before and after</h2>`, comparisonHtml(model.comparison));
  parts.push(`<h2>Numbers</h2><p class="muted">Steady state: warm-up steps left out.</p>`, factsHtml(model.numbers));
  parts.push(`<h2>Charts</h2>`, chartsHtml(model.charts.map((c) => ({ id: c.id, svg: renderChart(c) }))));
  parts.push(
    `<h2>Findings</h2>`,
    doctorHtml(model.doctor),
    `<p class="muted">Generated by brim from the run store; all numbers are recorded measurements.</p></main>`,
  );
  return htmlPage(`brim report: ${model.title}`, parts.join("\n"));
}

/**
 * A tune report as a self-contained HTML page.
 *
 * @example
 * ```ts
 * await writeFile("report.html", tuneHtml(model));
 * ```
 */
export function tuneHtml(model: TuneReportModel): string {
  const parts = [`<main><h1>brim report: ${esc(model.title)}</h1>`, factsHtml(model.facts), ...model.notes.map((n) => `<p class="note">${esc(n)}</p>`)];
  if (model.comparison !== null || model.parity !== null) parts.push(`<h2>Before and after</h2>`);
  if (model.comparison !== null) parts.push(comparisonHtml(model.comparison));
  if (model.parity !== null) parts.push(parityHtml(model.parity));
  parts.push(`<h2>Charts</h2>`, chartsHtml(model.charts.map((c) => ({ id: c.id, svg: renderChart(c) }))));
  parts.push(`<h2>Trials</h2>`, trialsHtml(model.trials), `</main>`);
  return htmlPage(`brim report: ${model.title}`, parts.join("\n"));
}
