/**
 * Writing reports: reads the run store, builds the report model, and writes Markdown, HTML, SVG and
 * PNG charts and (on request) a Perfetto trace into one folder, each file atomically.
 *
 * @module
 */
import { join, relative, resolve } from "node:path";
import { BrimError } from "../errors/index.ts";
import { writeFileAtomic as writeAtomic } from "../files.ts";
import { loadRun, loadTune } from "../record/load.ts";
import type { RunStore } from "../record/store.ts";
import { isRecordId } from "../record/store.ts";
import { runHtml, tuneHtml } from "./html.ts";
import { runMarkdown, tuneMarkdown } from "./markdown.ts";
import { runReport, tuneReport, type RecordedRun, type RunReportModel, type TuneReportModel } from "./model.ts";
import { perfettoTrace } from "./perfetto.ts";
import { openPngRenderer } from "./png.ts";
import { knobDifferences, overlayRunCharts } from "./progress.ts";
import { renderChart, svgDocument } from "./svg.ts";

/**
 * Options of {@link writeReport}.
 *
 * @example
 * ```ts
 * const options: ReportOptions = { vs: "3f2a", perfetto: true, png: false };
 * ```
 */
export interface ReportOptions {
  /** a run to compare against: the "before" */
  vs?: string;
  /** output folder; default `<store>/reports/<id>` */
  out?: string;
  /** also write `trace.json` for Perfetto */
  perfetto?: boolean;
  /** PNG copies of the charts (default true; skipped with a note when no Chromium) */
  png?: boolean;
  /** environment read for `BRIM_FONT_DIRS` (PNG fonts); default process.env */
  env?: NodeJS.ProcessEnv;
}

/**
 * One file a report wrote.
 *
 * @example
 * ```ts
 * result.files.filter((f: ReportFile) => f.kind === "png").length; // 4
 * ```
 */
export interface ReportFile {
  path: string;
  kind: "markdown" | "html" | "svg" | "png" | "trace";
}

/**
 * What {@link writeReport} did.
 *
 * @example
 * ```ts
 * const result: ReportResult = await writeReport(store, "latest");
 * result.dir; // ".brim/reports/20261122-101500-3f2a"
 * ```
 */
export interface ReportResult {
  kind: "run" | "tune";
  id: string;
  dir: string;
  files: ReportFile[];
  /** PNG charts written, and why none were when none were */
  png: { written: number; note: string | null };
  model: RunReportModel | TuneReportModel;
}

/** Every report file goes through brim's one atomic writer, its folder made first. */
const writeFileAtomic = (path: string, data: string | Uint8Array): Promise<void> => writeAtomic(path, data, { makeDir: true });

/**
 * What a reference names: a run or a tune. An exact id decides; `latest` is the newest run, or the
 * newest tune when that is newer or the newest run is one of its trials; a prefix is tried on runs,
 * then on tunes.
 *
 * @example
 * ```ts
 * await resolveRecord(store, "latest"); // { kind: "run", id: "20261122-101500-3f2a" }
 * ```
 */
export async function resolveRecord(store: RunStore, ref: string): Promise<{ kind: "run" | "tune"; id: string }> {
  if (ref === "latest" || ref === "last") {
    const runs = await store.runIds();
    const tunes = await store.tuneIds();
    const newestRun = runs[runs.length - 1];
    const newestTune = tunes[tunes.length - 1];
    if (newestTune !== undefined && (newestRun === undefined || (await store.readRunMeta(newestRun)).tune_id === newestTune || newestTune > newestRun))
      return { kind: "tune", id: newestTune };
  }
  if (isRecordId(ref)) {
    if ((await store.tuneIds()).includes(ref)) return { kind: "tune", id: ref };
    if ((await store.runIds()).includes(ref)) return { kind: "run", id: ref };
  }
  try {
    return { kind: "run", id: await store.resolveRun(ref) };
  } catch (runError) {
    if (!(runError instanceof BrimError) || runError.code !== "E_NOT_FOUND") throw runError;
    try {
      return { kind: "tune", id: await store.resolveTune(ref) };
    } catch (tuneError) {
      if (tuneError instanceof BrimError && tuneError.code === "E_NOT_FOUND") {
        throw new BrimError("E_NOT_FOUND", `'${ref}' is neither a run nor a tune in ${store.root} (brim dashboard lists them)`);
      }
      throw tuneError;
    }
  }
}

/** A --vs report: both runs on every chart, and the knobs that differ said with the comparison. */
function withOverlay(model: RunReportModel, run: RecordedRun, vs: RecordedRun): RunReportModel {
  const charts = overlayRunCharts({ label: "after", meta: run.meta, timeline: run.timeline }, { label: "before", meta: vs.meta, timeline: vs.timeline });
  const diff = knobDifferences(vs.meta, run.meta);
  const note =
    diff.length === 0
      ? "Knobs that differ: none (same knobs, cap and command)."
      : `Knobs that differ (before → after): ${diff.map((d) => `${d.name} ${d.a} → ${d.b}`).join("; ")}.`;
  return { ...model, charts, comparison: model.comparison === null ? null : { ...model.comparison, notes: [note, ...model.comparison.notes] } };
}

/**
 * Writes the report of a run or a tune.
 *
 * @example
 * ```ts
 * const result = await writeReport(new RunStore(".brim"), "latest", { vs: "20261122-093000-aa01", perfetto: true });
 * result.files.map((f) => f.path); // [".../report.md", ".../report.html", ".../charts/utilization.svg", ...]
 * ```
 */
export async function writeReport(store: RunStore, ref: string, options: ReportOptions = {}): Promise<ReportResult> {
  const target = await resolveRecord(store, ref);
  const vs = options.vs === undefined ? undefined : await loadRun(store, await store.resolveRun(options.vs));
  let model: RunReportModel | TuneReportModel;
  let traceRuns: (RecordedRun & { label?: string })[] = [];
  if (target.kind === "run") {
    const run = await loadRun(store, target.id);
    if (vs !== undefined && vs.meta.id === run.meta.id)
      throw new BrimError("E_INPUT", `--vs names the same run as the report (${run.meta.id}); compare with an earlier run`);
    model = runReport(run, vs);
    if (vs !== undefined) model = withOverlay(model, run, vs);
    traceRuns = [run];
  } else {
    const { tune, runs } = await loadTune(store, target.id);
    model = tuneReport(tune, runs, vs);
    traceRuns = [...runs.entries()].map(([index, run]) => ({ ...run, label: `trial ${index}` }));
  }
  if (options.perfetto === true && traceRuns.length === 0)
    throw new BrimError("E_NOT_FOUND", `no trial runs of tune ${target.id} are in the store: nothing to export for Perfetto`);
  const dir = resolve(options.out ?? join(store.root, "reports", target.id));
  const files: ReportFile[] = [];
  const charts = model.kind === "tune" && model.parity !== null ? [...model.charts, model.parity.chart] : model.charts;
  const svgs = charts.map((c) => ({ id: c.id, title: c.title, svg: renderChart(c) }));
  for (const c of svgs) {
    const path = join(dir, "charts", `${c.id}.svg`);
    await writeFileAtomic(path, svgDocument(c.svg));
    files.push({ path, kind: "svg" });
  }
  const png = { written: 0, note: null as string | null };
  const images = new Map<string, { path: string; title: string }>(svgs.map((c) => [c.id, { path: `charts/${c.id}.svg`, title: c.title }]));
  if (options.png !== false) {
    const opened = await openPngRenderer({ env: options.env ?? process.env });
    if ("unavailable" in opened) {
      png.note = `PNG charts skipped: ${opened.unavailable}. The SVG charts are complete.`;
    } else {
      try {
        for (const c of svgs) {
          const path = join(dir, "charts", `${c.id}.png`);
          await writeFileAtomic(path, await opened.renderer.render(c.svg));
          files.push({ path, kind: "png" });
          images.set(c.id, { path: `charts/${c.id}.png`, title: c.title });
          png.written++;
        }
      } finally {
        await opened.renderer.close();
      }
    }
  } else {
    png.note = "PNG charts not requested (--no-png).";
  }
  const markdown = model.kind === "run" ? runMarkdown(model, images) : tuneMarkdown(model, images);
  const mdPath = join(dir, "report.md");
  await writeFileAtomic(mdPath, png.note !== null && options.png !== false ? `${markdown}\n> ${png.note}\n` : markdown);
  const htmlPath = join(dir, "report.html");
  await writeFileAtomic(htmlPath, model.kind === "run" ? runHtml(model) : tuneHtml(model));
  files.unshift({ path: mdPath, kind: "markdown" }, { path: htmlPath, kind: "html" });
  if (options.perfetto === true) {
    const path = join(dir, "trace.json");
    await writeFileAtomic(path, JSON.stringify(perfettoTrace(traceRuns)));
    files.push({ path, kind: "trace" });
  }
  return { kind: target.kind, id: target.id, dir, files, png, model };
}

/**
 * A path as the user should read it: relative to `cwd` when inside it.
 *
 * @example
 * ```ts
 * displayPath("/home/me/proj/.brim/reports/x/report.md", "/home/me/proj"); // ".brim/reports/x/report.md"
 * ```
 */
export function displayPath(path: string, cwd: string): string {
  const rel = relative(cwd, path);
  return rel !== "" && !rel.startsWith("..") ? rel : path;
}
