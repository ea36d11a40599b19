/**
 * The dashboard's HTML pages, built from {@link RunView}, {@link TuneView} and the store's lists.
 * Pure: no I/O. Shares its sections and stylesheet with the HTML report.
 *
 * @module
 */
import { formatMaybeBytes, formatPercent, formatRate, formatSeconds, formatShare } from "../format.ts";
import { chartsHtml, doctorHtml, factsHtml, htmlPage, parityHtml, trialsHtml } from "../report/html.ts";
import type { NumberRow } from "../report/model.ts";
import { knobDifferences, LOSS_SMOOTHING, progressCharts, type ProgressAxis, type ProgressRun } from "../report/progress.ts";
import { escapeXml as esc, renderChart, type ChartSpec } from "../report/svg.ts";
import type { Timeline } from "../record/timeline/index.ts";
import type { RunMeta } from "../record/types.ts";
import { CHART_SCRIPT } from "./chart-script.ts";
import { COMPARE_SCRIPT, HOME_SCRIPT, LIVE_SCRIPT } from "./client.ts";
import type { RunListItem, RunView, TuneListItem, TuneView } from "./data.ts";

const DASHBOARD_CSS = `
header.top { background: #1f2937; color: #fff; padding: 10px 24px; display: flex; gap: 18px; align-items: baseline; }
header.top a { color: #fff; text-decoration: none; font-weight: 600; } header.top .muted { color: #cbd5e1; }
.tiles { display: flex; flex-wrap: wrap; gap: 10px; margin: 10px 0 4px; }
.tile { background: #fff; border: 1px solid #e0e0e0; border-radius: 6px; padding: 8px 14px; min-width: 120px; }
.tile .label { font-size: 12px; color: #666; } .tile .value { font-size: 18px; font-weight: 600; font-variant-numeric: tabular-nums; }
.live-badge { display: inline-block; background: #16a34a; color: #fff; border-radius: 10px; padding: 0 8px; font-size: 12px; }
.status-damaged, .status-unfinished, .status-crashed, .status-gpu_oom, .status-host_oom, .status-hung, .status-cap_exceeded { color: #b91c1c; }
td a, p a { color: #0b5cad; }
main { max-width: 1280px; }
[data-chart-box] { margin: 0 0 16px; } [data-chart-box] svg { width: 100%; height: auto; display: block; }
.filter { margin: 6px 0 12px; } .filter input { font: inherit; padding: 4px 8px; width: min(420px, 100%); border: 1px solid #ccc; border-radius: 4px; }
tr.trial td:first-child { padding-left: 22px; } tr.trial { font-size: 13px; } tr.trial .name { font-family: ui-monospace, monospace; font-size: 12px; }
tr.filtered-out { display: none; }
.loss-controls { display: flex; gap: 18px; align-items: center; font-size: 13px; margin: 4px 0 8px; } .loss-controls input[type=range] { width: 180px; vertical-align: middle; }
[data-hover-tip] { position: absolute; background: rgba(255,255,255,.96); border: 1px solid #bbb; border-radius: 4px; padding: 4px 8px; font-size: 12px; pointer-events: none; font-variant-numeric: tabular-nums; box-shadow: 0 1px 4px rgba(0,0,0,.15); z-index: 10; }
[data-hover-tip] [data-hover-x] { color: #555; }
table.runs td:first-child, table.tunes td:first-child, td.num, th.num { white-space: nowrap; }
table.runs code, table.tunes code { word-break: break-word; font-size: 12px; }
.picker { max-height: 340px; overflow: auto; border: 1px solid #e0e0e0; border-radius: 6px; background: #fff; } .picker table { margin: 0; }
.picker-bar { display: flex; gap: 18px; align-items: center; margin: 8px 0 14px; font-size: 14px; } .picker-bar button { font: inherit; padding: 4px 14px; }
.tag { display: inline-block; background: #eef2f7; border-radius: 8px; padding: 0 6px; margin-right: 4px; font-size: 12px; }
`;

function page(title: string, body: string, nonce: string, script = ""): string {
  const head = `<style nonce="${esc(nonce)}">${DASHBOARD_CSS}</style>`;
  const tail = script === "" ? "" : `<script nonce="${esc(nonce)}">${script}</script>`;
  return htmlPage(title, body + tail, head, nonce);
}

function header(storeRoot: string): string {
  return `<header class="top"><a href="/">brim dashboard</a><a href="/compare" data-compare-link>compare runs</a><span class="muted">store ${esc(storeRoot)}</span><span class="muted">read-only</span></header>`;
}

function ago(iso: string, now: number): string {
  const s = (now - Date.parse(iso)) / 1000;
  if (!Number.isFinite(s)) return iso;
  if (s < 90) return `${Math.max(0, Math.round(s))} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 172800) return `${Math.round(s / 3600)} h ago`;
  return iso.slice(0, 10);
}

/**
 * A trial's name on the home page: its knob values (not the temporary config it ran with).
 *
 * @example
 * ```ts
 * trialName({ batch_size: 64, precision: "bf16-mixed" }); // "batch_size=64 precision=bf16-mixed"
 * ```
 */
export function trialName(knobs: Record<string, number | string | boolean>): string {
  const parts = Object.entries(knobs).map(([k, v]) => `${k}=${String(v)}`);
  return parts.length === 0 ? "as configured" : parts.join(" ");
}

function runRow(r: RunListItem, now: number, trial: boolean): string {
  const name = trial
    ? `<a href="/runs/${esc(r.id)}" class="name">${esc(trialName(r.knobs))}</a>`
    : `<a href="/runs/${esc(r.id)}">${esc(r.name ?? r.id)}</a>${r.name !== undefined ? ` <span class="muted">${esc(r.id)}</span>` : ""}${Object.keys(r.tags).length > 0 ? ` ${tagsHtml(r.tags)}` : ""}`;
  const what = trial
    ? `trial <span class="muted">${esc(r.id)}</span>`
    : r.kind === "trial" && r.tune_id !== null
      ? `trial of <a href="/tunes/${esc(r.tune_id)}">tune</a>`
      : esc(r.kind);
  return `<tr data-run-id="${esc(r.id)}"${trial ? ` class="trial" data-trial-of="${esc(r.tune_id ?? "")}"` : ""}><td>${name}${r.live ? ` <span class="live-badge">live</span>` : ""}</td><td>${what}</td><td class="status-${esc(r.status)}">${esc(r.status)}</td><td>${esc(ago(r.started_at, now))}</td><td>${r.damaged !== undefined ? `<span class="damaged">${esc(r.damaged)}</span>` : `<code>${esc(r.command)}</code>`}</td><td>${esc(r.device)}</td><td class="num">${esc(formatRate(r.samples_per_s))}</td><td class="num">${esc(formatShare(r.data_wait_share))}</td><td class="num">${esc(formatPercent(r.gpu_util_mean))}</td><td class="num">${esc(formatMaybeBytes(r.peak_bytes))}</td><td class="num">${esc(formatSeconds(r.duration_s))}</td></tr>`;
}

/**
 * The home page: runs (live first), then tunes with their trials grouped under them, each trial named
 * by its knob values; a filter box, and the lists refresh themselves every few seconds.
 *
 * @example
 * ```ts
 * indexPage(await listRuns(store), await listTunes(store), store.root, nonce);
 * ```
 */
export function indexPage(runs: readonly RunListItem[], tunes: readonly TuneListItem[], storeRoot: string, nonce: string, now = Date.now()): string {
  const tuneIds = new Set(tunes.map((t) => t.id));
  const grouped = (r: RunListItem): boolean => r.kind === "trial" && r.tune_id !== null && tuneIds.has(r.tune_id);
  const standalone = runs.filter((r) => !grouped(r));
  const ordered = [...standalone.filter((r) => r.live), ...standalone.filter((r) => !r.live)];
  const runRows = ordered.map((r) => runRow(r, now, false)).join("");
  const tuneRows = tunes
    .map((t) => {
      const trials = runs.filter((r) => grouped(r) && r.tune_id === t.id).reverse();
      const head = `<tr data-tune-id="${esc(t.id)}" class="tune"><td><a href="/tunes/${esc(t.id)}">${esc(t.id)}</a>${t.running ? ` <span class="live-badge">running</span>` : ""}</td><td>${esc(ago(t.started_at, now))}</td><td>${t.damaged !== undefined ? `<span class="damaged status-damaged">damaged: ${esc(t.damaged)}</span>` : `<code>${esc(t.command)}</code>`}</td><td class="num" data-trials>${t.finished} ok of ${t.trials}</td><td>${esc(t.winner ?? "none")}</td><td class="num">${t.speedup === null ? "n/a" : `${t.speedup.toFixed(2)}×`}</td></tr>`;
      const nested =
        trials.length === 0
          ? ""
          : `<tr class="trials" data-trials-of="${esc(t.id)}"><td colspan="6"><details><summary>${trials.length} trial run${trials.length === 1 ? "" : "s"}</summary><table class="runs trials"><tbody>${trials.map((r) => runRow(r, now, true)).join("")}</tbody></table></details></td></tr>`;
      return head + nested;
    })
    .join("");
  const live = runs.filter((r) => r.live).length;
  const body = [
    header(storeRoot),
    `<main data-home data-refresh-ms="5000"><h1>Runs and tunes</h1>`,
    `<p class="filter"><input type="search" data-filter placeholder="filter: id, command, knob, status, device" aria-label="filter runs and tunes"></p>`,
    `<div data-lists><p class="muted" data-counts>${standalone.length} run${standalone.length === 1 ? "" : "s"}${live > 0 ? `, ${live} live` : ""}; ${tunes.length} tune${tunes.length === 1 ? "" : "s"} (trial runs under their tune). Refreshes every 5 s.</p>`,
    `<h2>Runs</h2>`,
    standalone.length === 0
      ? `<p>No runs yet: <code>brim run -- python train.py</code> records one.</p>`
      : `<table class="runs"><thead><tr><th>run</th><th>kind</th><th>status</th><th>started</th><th>command</th><th>device</th><th class="num">samples/s</th><th class="num">data wait</th><th class="num">GPU util</th><th class="num">peak</th><th class="num">duration</th></tr></thead><tbody>${runRows}</tbody></table>`,
    `<h2>Tunes</h2>`,
    tunes.length === 0
      ? `<p>No tunes yet: <code>brim tune -- python train.py</code> runs one.</p>`
      : `<table class="tunes"><thead><tr><th>tune</th><th>started</th><th>command</th><th class="num">trials</th><th>winner</th><th class="num">speedup</th></tr></thead><tbody>${tuneRows}</tbody></table>`,
    `</div></main>`,
  ].join("\n");
  return page("brim dashboard", body, nonce, HOME_SCRIPT);
}

function tiles(rows: readonly NumberRow[]): string {
  return `<div class="tiles">${rows.map((t) => `<div class="tile" data-tile="${esc(t.label)}"><div class="label">${esc(t.label)}</div><div class="value">${esc(t.value)}</div></div>`).join("")}</div>`;
}

/** The loss chart's controls: the smoothing slider (CHART_SCRIPT) and the y scale (links). */
function lossControls(charts: readonly ChartSpec[], scale: RunPageOptions["lossScale"], query: (next: { y: "auto" | "linear" | "log10" }) => string): string {
  const loss = charts.find((c) => c.id === "loss");
  if (loss === undefined || loss.series.every((s) => s.points.length === 0)) return "";
  const choice = (y: "auto" | "linear" | "log10", text: string): string =>
    (scale ?? "auto") === y ? `<strong>${text}</strong>` : `<a href="${esc(query({ y }))}" data-loss-scale-link="${y}">${text}</a>`;
  return [
    `<div class="loss-controls" data-loss-controls data-loss-scale="${loss.y.scale ?? "linear"}">`,
    `<label>loss smoothing <input type="range" min="0" max="0.99" step="0.01" value="${LOSS_SMOOTHING}" data-smoothing> <span data-smoothing-value>${LOSS_SMOOTHING.toFixed(2)}</span></label>`,
    `<span>loss axis: ${choice("auto", "auto")} · ${choice("linear", "linear")} · ${choice("log10", "log")}</span>`,
    `</div>`,
  ].join("");
}

/**
 * How a run page draws its progress charts: the x axis (step by default) and a run to overlay.
 *
 * @example
 * ```ts
 * const options: RunPageOptions = { axis: "time", vs: { meta: other.meta, timeline: other.timeline } };
 * ```
 */
export interface RunPageOptions {
  axis?: ProgressAxis;
  /** the loss chart's y scale; default: log past 1.5 decades (`lossScale`) */
  lossScale?: "linear" | "log10";
  vs?: { meta: RunMeta; timeline: Timeline } | null;
}

/**
 * A run's page: live tiles and charts that follow the run while it runs, its numbers and findings.
 *
 * @example
 * ```ts
 * runPage(await runView(store, id), store.root, nonce);
 * ```
 */
export function runPage(view: RunView, storeRoot: string, nonce: string, options: RunPageOptions = {}): string {
  const { model, meta } = view;
  const axis = options.axis ?? "step";
  const vs = options.vs ?? null;
  const progressRuns: ProgressRun[] = [
    { label: vs === null ? "this run" : meta.id, meta, timeline: view.timeline },
    ...(vs === null ? [] : [{ label: `vs ${vs.meta.id}`, meta: vs.meta, timeline: vs.timeline }]),
  ];
  // the live stream redraws the single-run, step-axis charts; an overlay or a time axis stays as loaded
  const scale = options.lossScale;
  const fixed = vs !== null || axis !== "step" || scale !== undefined;
  const query = (next: { x?: ProgressAxis; y?: "auto" | "linear" | "log10" }): string => {
    const q = new URLSearchParams();
    if ((next.x ?? axis) !== "step") q.set("x", next.x ?? axis);
    if (vs !== null) q.set("vs", vs.meta.id);
    const y = next.y ?? scale ?? "auto";
    if (y !== "auto") q.set("y", y === "log10" ? "log" : "linear");
    const text = q.toString();
    return text === "" ? `/runs/${meta.id}` : `/runs/${meta.id}?${text}`;
  };
  const differences = vs === null ? [] : knobDifferences(vs.meta, meta);
  const charts = progressCharts(progressRuns, axis, scale === undefined ? {} : { scale });
  const progress = [
    `<h2>Training progress</h2>`,
    `<p class="muted" data-axis="${axis}">x axis: ${(["step", "samples", "time"] as const)
      .map((x) => {
        const text = x === "samples" ? "samples seen" : x;
        return x === axis ? `<strong>${text}</strong>` : `<a href="${esc(query({ x }))}" data-axis-link="${x}">${text}</a>`;
      })
      .join(
        " · ",
      )}${vs !== null ? ` · overlaid with <a href="/runs/${esc(vs.meta.id)}">${esc(vs.meta.id)}</a> (<a href="${esc(`/runs/${meta.id}${axis === "step" ? "" : `?x=${axis}`}`)}">remove</a>)` : ` · <a href="/compare?run=${esc(meta.id)}" data-compare-this>compare with other runs</a>`}</p>`,
    vs === null
      ? ""
      : differences.length === 0
        ? `<p data-knob-diff>Same knobs, cap and command as ${esc(vs.meta.id)}.</p>`
        : `<table class="facts" data-knob-diff><thead><tr><th>differs</th><th>${esc(vs.meta.id)}</th><th>this run</th></tr></thead><tbody>${differences.map((d) => `<tr><th>${esc(d.name)}</th><td>${esc(d.a)}</td><td>${esc(d.b)}</td></tr>`).join("")}</tbody></table>`,
    lossControls(charts, scale, query),
    chartsHtml(charts.map((c) => ({ id: c.id, svg: renderChart(c) }))).replace(
      /<figure data-chart-box=/g,
      fixed ? "<figure data-static data-chart-box=" : "<figure data-chart-box=",
    ),
  ].join("\n");
  const statusText = view.live
    ? "live"
    : view.status === "unfinished"
      ? "unfinished: no end recorded and the timeline stopped growing"
      : `ended: ${view.status}`;
  const body = [
    header(storeRoot),
    `<main data-run="${esc(meta.id)}" data-live="${view.live ? "true" : "false"}" data-offset="${view.offset}">`,
    `<h1>${esc(model.title)} ${view.live ? `<span class="live-badge" data-live-badge>live</span>` : ""}</h1>`,
    `<p>Status: <strong data-status>${esc(statusText)}</strong>${meta.tune_id !== null ? ` · trial of <a href="/tunes/${esc(meta.tune_id)}">tune ${esc(meta.tune_id)}</a>` : ""}</p>`,
    tiles(view.tiles),
    factsHtml(model.facts),
    progress,
    `<h2>Charts</h2>`,
    chartsHtml(model.charts.filter((c) => c.id !== "loss").map((c) => ({ id: c.id, svg: renderChart(c) }))),
    `<h2>Numbers</h2><p class="muted">Steady state: warm-up steps left out.</p>`,
    factsHtml(model.numbers).replace('class="facts"', 'class="facts numbers"'),
    `<h2>Findings</h2>`,
    view.live ? `<p class="note" data-live-note>The run is still going: these findings cover the timeline when the page was loaded.</p>` : "",
    doctorHtml(model.doctor),
    `<p class="muted">Report files: <code>brim report ${esc(meta.id)}</code> · before/after: <code>brim report ${esc(meta.id)} --vs &lt;run&gt;</code></p>`,
    `</main>`,
  ].join("\n");
  return page(`${model.title} · brim`, body, nonce, view.live ? LIVE_SCRIPT + CHART_SCRIPT : CHART_SCRIPT);
}

/** A run as the compare page names it: its --name (and id), else its id. */
function runLabel(meta: RunMeta): string {
  return meta.name !== undefined ? `${meta.name} (${meta.id})` : meta.id;
}

function tagsHtml(tags: Record<string, string>): string {
  return Object.entries(tags)
    .map(([k, v]) => `<span class="tag">${esc(k)}=${esc(v)}</span>`)
    .join("");
}

/**
 * The compare page: a run picker (tick two or more runs, choose the x axis) and, for the runs picked,
 * their loss and samples/s overlaid, one colour per run, with the loss smoothing, log scale and hover
 * of the run page.
 *
 * @example
 * ```ts
 * comparePage(await listRuns(store), [await loadRun(store, a), await loadRun(store, b)], store.root, nonce, { axis: "samples" });
 * ```
 */
export function comparePage(
  list: readonly RunListItem[],
  picked: readonly { meta: RunMeta; timeline: Timeline }[],
  storeRoot: string,
  nonce: string,
  options: { axis?: ProgressAxis; lossScale?: "linear" | "log10" } = {},
  now = Date.now(),
): string {
  const axis = options.axis ?? "step";
  const scale = options.lossScale;
  const chosen = new Set(picked.map((p) => p.meta.id));
  const query = (next: { x?: ProgressAxis; y?: "auto" | "linear" | "log10" }): string => {
    const q = new URLSearchParams();
    for (const p of picked) q.append("run", p.meta.id);
    if ((next.x ?? axis) !== "step") q.set("x", next.x ?? axis);
    const y = next.y ?? scale ?? "auto";
    if (y !== "auto") q.set("y", y === "log10" ? "log" : "linear");
    return `/compare?${q.toString()}`;
  };
  const rows = list
    .map(
      (r) =>
        `<tr data-pick-row="${esc(r.id)}"><td><input type="checkbox" name="run" value="${esc(r.id)}" id="pick-${esc(r.id)}" data-pick="${esc(r.id)}"${chosen.has(r.id) ? " checked" : ""}></td><td><label for="pick-${esc(r.id)}">${esc(r.name ?? r.id)}</label>${r.name !== undefined ? ` <span class="muted">${esc(r.id)}</span>` : ""}</td><td>${tagsHtml(r.tags)}${r.kind === "trial" ? `<span class="muted">trial ${esc(trialName(r.knobs))}</span>` : ""}</td><td class="status-${esc(r.status)}">${esc(r.status)}</td><td>${esc(ago(r.started_at, now))}</td><td class="num">${esc(formatRate(r.samples_per_s))}</td><td><code>${esc(r.command)}</code></td></tr>`,
    )
    .join("");
  const axisChoice = (["step", "samples", "time"] as const)
    .map((x) => `<label><input type="radio" name="x" value="${x}"${x === axis ? " checked" : ""}> ${x === "samples" ? "samples seen" : x}</label>`)
    .join(" ");
  const picker = [
    `<form method="get" action="/compare" data-run-picker>`,
    `<p class="filter"><input type="search" data-filter placeholder="filter: name, tag, id, command, status" aria-label="filter runs"></p>`,
    `<div class="picker"><table class="runs"><thead><tr><th></th><th>run</th><th>tags</th><th>status</th><th>started</th><th class="num">samples/s</th><th>command</th></tr></thead><tbody>${rows}</tbody></table></div>`,
    `<div class="picker-bar"><span>x axis: ${axisChoice}</span><button type="submit" data-overlay>Overlay the ticked runs</button></div>`,
    `</form>`,
  ].join("");
  const progress: ProgressRun[] = picked.map((p) => ({ label: runLabel(p.meta), meta: p.meta, timeline: p.timeline }));
  const charts = progress.length >= 2 ? progressCharts(progress, axis, scale === undefined ? {} : { scale }) : [];
  const first = picked[0];
  const differences =
    first === undefined
      ? ""
      : picked
          .slice(1)
          .map((p) => {
            const d = knobDifferences(first.meta, p.meta);
            return `<tr><th>${esc(runLabel(p.meta))}</th><td>${d.length === 0 ? "same knobs, cap and command" : esc(d.map((x) => `${x.name}: ${x.a} → ${x.b}`).join("; "))}</td></tr>`;
          })
          .join("");
  const body = [
    header(storeRoot),
    `<main data-compare data-picked="${esc([...chosen].join(","))}"><h1>Compare runs</h1>`,
    `<p class="muted">Tick two or more runs and overlay their loss and samples/s, by step, by samples seen or over time. <code>brim run --name … --tag key=value</code> names runs.</p>`,
    picker,
    progress.length < 2
      ? `<p class="note" data-pick-more>Pick ${progress.length === 0 ? "two or more runs" : "one more run"} to overlay.</p>`
      : [
          `<h2>Overlaid: ${progress.length} runs ${axis === "samples" ? "by samples seen" : axis === "time" ? "over time" : "by step"}</h2>`,
          `<table class="facts" data-knob-diff><thead><tr><th>run</th><th>differs from ${esc(runLabel(first!.meta))}</th></tr></thead><tbody>${differences}</tbody></table>`,
          lossControls(charts, scale, query),
          chartsHtml(charts.map((c) => ({ id: c.id, svg: renderChart(c) }))).replace(/<figure data-chart-box=/g, "<figure data-static data-chart-box="),
        ].join("\n"),
    `</main>`,
  ].join("\n");
  return page("compare runs · brim", body, nonce, COMPARE_SCRIPT + CHART_SCRIPT);
}

/**
 * A tune's page: the winner's loss beside yours, its curves, the trial table (each trial links to
 * its run) and the winner.
 *
 * @example
 * ```ts
 * tunePage(await tuneView(store, id), store.root, nonce);
 * ```
 */
export function tunePage(view: TuneView, storeRoot: string, nonce: string): string {
  const { model } = view;
  const body = [
    header(storeRoot),
    `<main data-tune="${esc(model.id)}">`,
    `<h1>${esc(model.title)} ${view.running ? `<span class="live-badge">running</span>` : ""}</h1>`,
    view.running ? `<p class="note">The tune is still running: reload for new trials.</p>` : "",
    factsHtml(model.facts),
    ...model.notes.map((n) => `<p class="note">${esc(n)}</p>`),
    model.parity === null ? "" : `<h2>Your configuration and the winner</h2>${parityHtml(model.parity)}`,
    `<h2>Curves</h2>`,
    chartsHtml(model.charts.map((c) => ({ id: c.id, svg: renderChart(c) }))),
    `<h2>Trials</h2>`,
    trialsHtml(model.trials, (runId) => `/runs/${runId}`),
    `</main>`,
  ].join("\n");
  // the run page's hover readout: each run's loss at the samples seen under the pointer
  return page(`${model.title} · brim`, body, nonce, CHART_SCRIPT);
}

/**
 * An error page.
 *
 * @example
 * ```ts
 * errorPage(404, "no run '20990101-000000-ffff'", store.root, nonce);
 * ```
 */
export function errorPage(status: number, message: string, storeRoot: string, nonce: string): string {
  return page(`${status} · brim`, `${header(storeRoot)}<main><h1>${status}</h1><p>${esc(message)}</p><p><a href="/">All runs and tunes</a></p></main>`, nonce);
}
