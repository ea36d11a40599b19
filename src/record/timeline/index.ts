/**
 * The one model of what a run measured (docs/run-store.md "What the numbers mean"): the typed
 * entries of timeline.ndjson, read as a stream in bounded memory, and the definitions every reader
 * uses — the main process, steady steps, the steady window, the job's GPUs, whether a run is a GPU
 * run, throughput and its source, data wait, peaks and GPU means. The summary, the live view,
 * doctor, reports, the dashboard and the tuner all take their numbers from here.
 *
 * @module
 */
export type { EventEntry, GpuReading, HelloEntry, SampleEntry, StepEntry, StepMemory, StepSource, Timeline, TimelineMeasures, RankMeasures } from "./types.ts";
export { isGpuRun, isWarmupStep, MODEL_SAMPLES_FIELD, parseTimelineLine, sampleOf, stepOf, stepSeconds, stepStart } from "./entries.ts";
export { loadTimeline, loadTimelineSpread, timelineEntries } from "./file.ts";
export { jobGpuIndexes, mainProcessPid, MAX_EVENTS, MAX_SAMPLES, MAX_STEPS_PER_PROCESS, readTimeline, TimelineFold } from "./fold.ts";
export { mainSteps, steadySamples, steadySteps, summaryOf } from "./definitions.ts";
