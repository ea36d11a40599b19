/**
 * The record types, all derived from the one description in {@link ./schema.ts}, and the peaks the
 * guard tracks live.
 *
 * @module
 */
export type { EndCause, KnobBindingRecord, RunDevice, RunEnd, RunMeta, RunSummary, TimelineEntry, TuneRecord, TuneTrialRecord } from "./schema.ts";

/** Peaks the guard tracked over every reading (the timeline keeps only some of them). */
export interface LivePeaks {
  treeGpuBytes: number | null;
  treeRssBytes: number | null;
}
