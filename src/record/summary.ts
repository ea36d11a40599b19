/**
 * run.json's summary: the definitions of {@link ./timeline/index.ts} applied to a whole timeline.
 *
 * @module
 */
import { loadTimeline, readTimeline, summaryOf, type Timeline } from "./timeline/index.ts";
import type { LivePeaks, RunSummary, TimelineEntry } from "./types.ts";

/**
 * The numbers of a run (docs/run-store.md "summary"), from its timeline (entries, or one already
 * read), the peaks the guard tracked live and the job's wall time. A number brim could not measure
 * is `null`, never 0.
 *
 * @example
 * ```ts
 * const summary = summarizeRun(entries, { treeGpuBytes: null, treeRssBytes: 2e9 }, 61.5);
 * summary.samples_per_s;
 * ```
 */
export function summarizeRun(timeline: Timeline | Iterable<TimelineEntry>, peaks: LivePeaks, durationS: number): RunSummary {
  const tl = "measured" in timeline ? timeline : readTimeline(timeline);
  return summaryOf(tl, peaks, durationS);
}

/**
 * {@link summarizeRun} of a timeline file, read as a stream in bounded memory.
 *
 * @example
 * ```ts
 * await summarizeTimelineFile(join(runDir, "timeline.ndjson"), peaks, 61.5);
 * ```
 */
export async function summarizeTimelineFile(path: string, peaks: LivePeaks, durationS: number): Promise<RunSummary> {
  return summaryOf(await loadTimeline(path), peaks, durationS);
}
