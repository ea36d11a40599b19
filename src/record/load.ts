/**
 * Loading what the readers show: a run (checked run.json and its timeline, streamed) and a tune
 * with the trial runs the store still has. The one loader of report, doctor and dashboard.
 *
 * @module
 */
import { assertTimelineSound } from "./damage.ts";
import { join } from "node:path";
import { BrimError } from "../errors/index.ts";
import { isRecordId, type RunStore } from "./store.ts";
import { loadTimeline, type Timeline } from "./timeline/index.ts";
import type { RunMeta, TuneRecord } from "./types.ts";

/**
 * A recorded run: its checked metadata and its timeline, read once.
 *
 * @example
 * ```ts
 * const run: RecordedRun = await loadRun(store, id);
 * run.timeline.measured.samples_per_s;
 * ```
 */
export interface RecordedRun {
  meta: RunMeta;
  timeline: Timeline;
}

/**
 * The path of a run's timeline.
 *
 * @example
 * ```ts
 * timelinePath(store, id); // ".brim/runs/<id>/timeline.ndjson"
 * ```
 */
export function timelinePath(store: RunStore, id: string): string {
  return join(store.runDir(id), "timeline.ndjson");
}

/**
 * A run as it is now, its timeline streamed in bounded memory (a running job's up to its last whole line).
 *
 * @example
 * ```ts
 * const { meta, timeline } = await loadRun(store, await store.resolveRun("latest"));
 * ```
 */
export async function loadRun(store: RunStore, id: string, options: { until?: number; onOffset?: (offset: number) => void } = {}): Promise<RecordedRun> {
  const meta = await store.readRunMeta(id);
  // A damaged timeline would read as a run with no steps: said so instead.
  await assertTimelineSound(timelinePath(store, id), id);
  try {
    return { meta, timeline: await loadTimeline(timelinePath(store, id), options) };
  } catch (error) {
    throw new BrimError("E_IO", `cannot read the timeline of run ${id}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * A tune and the trial runs the store still has, by trial index. A trial whose run is gone is left
 * out (its numbers come from tune.json); a trial run that is damaged is an error that names it.
 *
 * @example
 * ```ts
 * const { tune, runs } = await loadTune(store, id);
 * runs.get(0)?.meta.id;
 * ```
 */
export async function loadTune(store: RunStore, id: string): Promise<{ tune: TuneRecord; runs: Map<number, RecordedRun> }> {
  const tune = await store.readTune(id);
  const runs = new Map<number, RecordedRun>();
  for (const t of tune.trials) {
    if (t.run_id === null || !isRecordId(t.run_id)) continue;
    try {
      runs.set(t.index, await loadRun(store, t.run_id));
    } catch (error) {
      if (!(error instanceof BrimError) || error.code !== "E_NOT_FOUND") throw error;
    }
  }
  return { tune, runs };
}
