/**
 * What the dashboard shows, read from the run store: run and tune lists, one run with its charts and
 * findings, one tune with its curves. Read-only.
 *
 * @module
 */
import { stat } from "node:fs/promises";
import { measureRun } from "../analyze/measure.ts";
import { formatMaybeBytes, formatPercent, formatRate, formatSeconds, formatShare } from "../format.ts";
import { formatBytes } from "../bytes.ts";
import { BrimError } from "../errors/index.ts";
import { assertTimelineSound } from "../record/damage.ts";
import { loadTune, timelinePath } from "../record/load.ts";
import { isRecordId, type RunStore } from "../record/store.ts";
import { isGpuRun, loadTimelineSpread, mainSteps, stepSeconds, type Timeline } from "../record/timeline/index.ts";
import type { RunMeta, TuneRecord } from "../record/types.ts";
import { runCharts } from "../report/charts.ts";
import { measureRows, runReport, tuneReport, type NumberRow, type RunReportModel, type TuneReportModel } from "../report/model.ts";
import { progressCharts } from "../report/progress.ts";
import type { ChartSpec } from "../report/svg.ts";

/**
 * A run without an end whose timeline has not grown for this long is "unfinished", not running.
 *
 * @example
 * ```ts
 * const stale = Date.now() / 1000 - timelineMtimeS > STALE_AFTER_S;
 * ```
 */
export const STALE_AFTER_S = 120;

/**
 * A run page reads a timeline whole up to this size; past it, evenly spread parts of this total
 * size (the charts and findings are then drawn from those parts, the numbers from run.json).
 *
 * @example
 * ```ts
 * const sampled = timelineBytes > PAGE_READ_BYTES;
 * ```
 */
export const PAGE_READ_BYTES = 16 * 2 ** 20;

/**
 * One row of the run list.
 *
 * @example
 * ```ts
 * (await listRuns(store)).filter((r: RunListItem) => r.live).map((r) => r.id);
 * ```
 */
export interface RunListItem {
  id: string;
  /** --name, when given */
  name?: string;
  /** --tag key=value */
  tags: Record<string, string>;
  kind: "run" | "trial";
  tune_id: string | null;
  /** the knob values the run was given (a trial's name on the home page) */
  knobs: Record<string, number | string | boolean>;
  command: string;
  started_at: string;
  status: string;
  live: boolean;
  device: string;
  samples_per_s: number | null;
  data_wait_share: number | null;
  gpu_util_mean: number | null;
  peak_bytes: number | null;
  duration_s: number | null;
  /** why the run's record cannot be read (then `status` is "damaged"); absent when it reads */
  damaged?: string;
}

/**
 * One row of the tune list.
 *
 * @example
 * ```ts
 * (await listTunes(store)).map((t: TuneListItem) => `${t.id}: ${t.winner ?? "no winner"}`);
 * ```
 */
export interface TuneListItem {
  id: string;
  name?: string;
  tags: Record<string, string>;
  command: string;
  started_at: string;
  running: boolean;
  trials: number;
  finished: number;
  winner: string | null;
  speedup: number | null;
  /** why the tune's record cannot be read; absent when it reads */
  damaged?: string;
}

/**
 * A run as its page shows it.
 *
 * @example
 * ```ts
 * const view: RunView = await runView(store, id);
 * view.offset; // where the live stream resumes
 * ```
 */
export interface RunView {
  model: RunReportModel;
  meta: RunMeta;
  live: boolean;
  status: string;
  /** byte offset of the timeline the page was built from: live updates continue from here */
  offset: number;
  tiles: NumberRow[];
  /** the timeline the page was built from (the progress charts read it) */
  timeline: Timeline;
}

/**
 * A tune as its page shows it.
 *
 * @example
 * ```ts
 * const view: TuneView = await tuneView(store, id);
 * view.model.charts.length; // 2
 * ```
 */
export interface TuneView {
  model: TuneReportModel;
  tune: TuneRecord;
  running: boolean;
}

/**
 * Where a run stands: its end cause, `running` while its timeline grows, `unfinished` when it has no
 * end and its timeline stopped growing {@link STALE_AFTER_S} ago (brim itself was killed).
 *
 * @example
 * ```ts
 * await runStatus(store, meta, Date.now() / 1000); // { status: "running", live: true }
 * ```
 */
export async function runStatus(store: RunStore, meta: RunMeta, nowS: number): Promise<{ status: string; live: boolean }> {
  if (meta.end !== null) return { status: meta.end.cause, live: false };
  try {
    const { mtimeMs } = await stat(timelinePath(store, meta.id));
    if (nowS - mtimeMs / 1000 <= STALE_AFTER_S) return { status: "running", live: true };
  } catch {
    // no timeline yet: the run has just started, or never did
    if (nowS - Date.parse(meta.started_at) / 1000 <= STALE_AFTER_S) return { status: "running", live: true };
  }
  return { status: "unfinished", live: false };
}

/** A record id's own time (`YYYYMMDD-HHMMSS-xxxx`, UTC) as an ISO date: where the record cannot say. */
function startedAtOfId(id: string): string {
  const m = /^(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})-/.exec(id);
  return m === null ? new Date(0).toISOString() : `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.000Z`;
}

function device(meta: RunMeta): string {
  return !isGpuRun(meta) ? `CPU (${meta.device.host.cpus} cores)` : meta.device.gpus.map((g) => g.name).join(", ");
}

/**
 * The runs of the store, newest first; running ones are measured from their timeline so far.
 *
 * @example
 * ```ts
 * (await listRuns(store)).filter((r) => r.live);
 * ```
 */
export async function listRuns(store: RunStore, limit = 500, now = Date.now()): Promise<RunListItem[]> {
  const ids = (await store.runIds()).reverse().slice(0, limit);
  const items: RunListItem[] = [];
  for (const id of ids) {
    let meta: RunMeta;
    try {
      meta = await store.readRunMeta(id);
    } catch (error) {
      if (!(error instanceof BrimError)) throw error;
      // Listed with a mark, not hidden: the user learns the record is there and what is wrong with it.
      items.push({
        id,
        tags: {},
        kind: "run",
        tune_id: null,
        knobs: {},
        command: "",
        started_at: startedAtOfId(id),
        status: "damaged",
        live: false,
        device: "",
        samples_per_s: null,
        data_wait_share: null,
        gpu_util_mean: null,
        peak_bytes: null,
        duration_s: null,
        damaged: error.message,
      });
      continue;
    }
    const { status, live } = await runStatus(store, meta, now / 1000);
    const s = meta.summary;
    let measured: {
      samples_per_s: number | null;
      data_wait_share: number | null;
      gpu_util_mean: number | null;
      peak: number | null;
      duration: number | null;
    } | null =
      s === null
        ? null
        : {
            samples_per_s: s.samples_per_s,
            data_wait_share: s.data_wait_share,
            gpu_util_mean: s.gpu_util_mean,
            peak: s.peak_tree_gpu_bytes ?? s.peak_tree_rss_bytes,
            duration: s.duration_s,
          };
    if (measured === null && live) {
      const { timeline } = await loadTimelineSpread(timelinePath(store, id), { budgetBytes: PAGE_READ_BYTES / 4 });
      const m = measureRun(meta, timeline);
      measured = {
        samples_per_s: m.samples_per_s,
        data_wait_share: m.data_wait_share,
        gpu_util_mean: m.gpu_util_mean,
        peak: m.peak_tree_gpu_bytes ?? m.peak_tree_rss_bytes,
        duration: null,
      };
    }
    items.push({
      id,
      ...(meta.name !== undefined ? { name: meta.name } : {}),
      tags: meta.tags ?? {},
      kind: meta.kind,
      tune_id: meta.tune_id,
      knobs: meta.knobs,
      command: meta.command.join(" "),
      started_at: meta.started_at,
      status,
      live,
      device: device(meta),
      samples_per_s: measured?.samples_per_s ?? null,
      data_wait_share: measured?.data_wait_share ?? null,
      gpu_util_mean: measured?.gpu_util_mean ?? null,
      peak_bytes: measured?.peak ?? null,
      duration_s: measured?.duration ?? null,
    });
  }
  return items;
}

/**
 * Whether a listed run or tune has the name and every tag asked for (`brim runs --name --tag`).
 *
 * @example
 * ```ts
 * (await listRuns(store)).filter((r) => hasLabels(r, { tags: { model: "resnet50" } }));
 * ```
 */
export function hasLabels(item: { name?: string; tags: Record<string, string> }, wanted: { name?: string; tags?: Record<string, string> }): boolean {
  if (wanted.name !== undefined && item.name !== wanted.name) return false;
  return Object.entries(wanted.tags ?? {}).every(([key, value]) => item.tags[key] === value);
}

/**
 * The tunes of the store, newest first.
 *
 * @example
 * ```ts
 * (await listTunes(store))[0]?.winner;
 * ```
 */
export async function listTunes(store: RunStore, limit = 200): Promise<TuneListItem[]> {
  const items: TuneListItem[] = [];
  for (const id of (await store.tuneIds()).reverse().slice(0, limit)) {
    let tune: TuneRecord;
    try {
      tune = await store.readTune(id);
    } catch (error) {
      if (!(error instanceof BrimError)) throw error;
      items.push({
        id,
        tags: {},
        command: "",
        started_at: startedAtOfId(id),
        running: false,
        trials: 0,
        finished: 0,
        winner: null,
        speedup: null,
        damaged: error.message,
      });
      continue;
    }
    items.push({
      id,
      ...(tune.name !== undefined ? { name: tune.name } : {}),
      tags: tune.tags ?? {},
      command: tune.command.join(" "),
      started_at: tune.started_at,
      running: tune.ended_at === null,
      trials: tune.trials.length,
      finished: tune.trials.filter((t) => t.end === "ok").length,
      winner:
        tune.winner === null
          ? null
          : Object.entries(tune.winner.knobs)
              .map(([k, v]) => `${k}=${String(v)}`)
              .join(", "),
      speedup: tune.winner?.speedup ?? null,
    });
  }
  return items;
}

/**
 * One run for its page: the report model (numbers, charts, findings) and where live updates resume.
 * Throws `E_NOT_FOUND` for an id that is not a run of the store.
 *
 * @example
 * ```ts
 * const view = await runView(store, id);
 * view.model.doctor.findings.length;
 * ```
 */
export async function runView(store: RunStore, id: string, now = Date.now()): Promise<RunView> {
  if (!isRecordId(id)) throw new BrimError("E_NOT_FOUND", `no run '${id}'`);
  const meta = await store.readRunMeta(id);
  await assertTimelineSound(timelinePath(store, id), id);
  const { timeline, offset } = await loadTimelineSpread(timelinePath(store, id), { budgetBytes: PAGE_READ_BYTES });
  const { status, live } = await runStatus(store, meta, now / 1000);
  return { model: runReport({ meta, timeline }), meta, live, status, offset, tiles: liveTiles(meta, timeline), timeline };
}

/**
 * One tune for its page, with its trial runs where the store still has them.
 *
 * @example
 * ```ts
 * (await tuneView(store, id)).model.charts.map((c) => c.id); // ["tune_throughput", "tune_memory"]
 * ```
 */
export async function tuneView(store: RunStore, id: string): Promise<TuneView> {
  if (!isRecordId(id)) throw new BrimError("E_NOT_FOUND", `no tune '${id}'`);
  const { tune, runs } = await loadTune(store, id);
  return { model: tuneReport(tune, runs), tune, running: tune.ended_at === null };
}

/**
 * The run page's live part recomputed from the timeline so far: its charts and numbers, as the
 * stream sends them (no findings: those need the whole run).
 *
 * @example
 * ```ts
 * liveCharts(meta, fold.timeline()).charts.length; // 6: the four run charts, loss and throughput by step
 * ```
 */
export function liveCharts(meta: RunMeta, tl: Timeline): { charts: ChartSpec[]; numbers: NumberRow[]; tiles: NumberRow[] } {
  const m = measureRun(meta, tl);
  return {
    charts: [...runCharts(meta, tl, m), ...progressCharts([{ label: "this run", meta, timeline: tl }], "step")],
    numbers: measureRows(m, isGpuRun(meta)),
    tiles: liveTiles(meta, tl),
  };
}

/**
 * The live tiles of a run page: the latest step and reading.
 *
 * @example
 * ```ts
 * liveTiles(meta, timeline).map((t) => t.label); // ["step", "samples/s", "data wait", ...]
 * ```
 */
export function liveTiles(meta: RunMeta, tl: Timeline): NumberRow[] {
  const steps = mainSteps(tl);
  const step = steps[steps.length - 1];
  const sample = tl.samples[tl.samples.length - 1];
  const busy = step === undefined ? 0 : (stepSeconds(step) ?? 0);
  const gpu = isGpuRun(meta);
  const utils = (sample?.gpus ?? []).filter((g) => tl.measured.gpu_indexes.includes(g.index) && g.util !== null).map((g) => g.util as number);
  const util = utils.length === 0 ? null : utils.reduce((a, b) => a + b, 0) / utils.length;
  const memory = gpu ? (sample?.tree.gpu_bytes ?? null) : (sample?.tree.rss_bytes ?? null);
  const last = Math.max(tl.samples[tl.samples.length - 1]?.t ?? 0, step?.t ?? 0);
  const start = tl.start?.t ?? Date.parse(meta.started_at) / 1000;
  return [
    { label: "step", value: step === undefined ? "–" : `${step.step}${step.warmup ? " (warm-up)" : ""}` },
    { label: "samples/s", value: step === undefined || busy <= 0 || step.samples === null ? "–" : formatRate(step.samples / busy) },
    { label: "data wait", value: step === undefined || busy <= 0 ? "–" : formatShare((step.wait_s ?? 0) / busy) },
    gpu ? { label: "GPU utilization", value: formatPercent(util) } : { label: "CPU of the job", value: formatPercent(sample?.tree.cpu_percent ?? null) },
    { label: gpu ? "GPU memory" : "RSS", value: `${formatMaybeBytes(memory)}${meta.cap_bytes !== null ? ` of ${formatBytes(meta.cap_bytes)}` : ""}` },
    { label: "elapsed", value: last > 0 ? formatSeconds(Math.max(0, last - start)) : "–" },
  ];
}
