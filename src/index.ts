/**
 * brim's public API: plan the memory of a training job, run it guarded, tune and apply its settings,
 * read the run store, diagnose and report. Internals (the job runner, the channel, config editing,
 * search strategies) are not part of it.
 *
 * @example
 * ```ts
 * import { readFileSync } from "node:fs";
 * import { parseModelFile, plan } from "brim-gpu";
 * const model = parseModelFile(readFileSync("examples/nbeats/model.yaml", "utf8"), "model.yaml");
 * const report = plan(model, { gpu: "rtx-3060", precision: "bf16-mixed" });
 * console.log(report.max_micro_batch, report.memory.peak_bytes);
 *
 * // tune a job on real trials, then write the winner into its config
 * import { openDevices, RunStore, tune, applyTune, loadRun, diagnose } from "brim-gpu";
 * const result = await tune({ command: ["python", "train.py", "--config", "config.yaml"], cwd: process.cwd(),
 *   maxTrials: 12, maxTimeS: 900, warmupSteps: 3, measureSteps: 20, trialTimeLimitS: 300 },
 *   { devices: openDevices(), store: new RunStore(".brim") });
 * await applyTune(result.record, { force: false, dryRun: false });
 *
 * // read a recorded run and ask why it is slow
 * const store = new RunStore(".brim");
 * const run = await loadRun(store, await store.resolveRun("latest"));
 * diagnose(run.meta, run.timeline).findings.map((f) => f.title);
 * ```
 * @module
 */
// errors every call may throw
export { BrimError, InputError, UsageError, ERROR_CODES, isBrimError, type ErrorCode } from "./errors/index.ts";
export { parseByteSize, formatBytes } from "./bytes.ts";
// plan
export { plan, type PlanOptions, type PlanReport, type PlanSection, type Suggestion, type Assumption } from "./plan/planner.ts";
export { parseModelFile, type ModelInput } from "./plan/model-file.ts";
export { parseModelSpec, PRECISIONS, OPTIMIZERS, FAMILIES, type ModelSpec, type Precision, type Optimizer } from "./plan/spec.ts";
export { GPU_CATALOG, findGpu, type GpuSpec, type GpuArchitecture } from "./plan/catalog.ts";
export { SHARDINGS, type Sharding } from "./plan/memory.ts";
export { modelProfileSchema, type ModelProfile } from "./plan/profile.ts";
// devices
export { openDevices, startSampler, type Devices, type DeviceInventory, type Reading, type Sampler } from "./devices/index.ts";
// run
export { guardRun, type GuardOptions, type GuardResult } from "./guard/guard.ts";
export type { LiveState } from "./guard/live.ts";
// tune and apply
export { tune, type TuneOptions, type TuneResult } from "./tune/tune.ts";
export { applyTune, type ApplyTuneResult } from "./tune/apply.ts";
// the store and its reader
export { RunStore, storeRoot } from "./record/store.ts";
export { loadRun, loadTune, type RecordedRun } from "./record/load.ts";
export {
  loadTimeline,
  readTimeline,
  type Timeline,
  type TimelineMeasures,
  type StepEntry,
  type SampleEntry,
  type EventEntry,
  type StepSource,
} from "./record/timeline/index.ts";
export type { RunMeta, RunSummary, RunEnd, EndCause, TimelineEntry, TuneRecord, TuneTrialRecord } from "./record/types.ts";
// doctor and report
export { diagnose, CHECKS, type DoctorReport, type Finding, type CheckId } from "./analyze/doctor/index.ts";
export { measureRun, type RunMeasures } from "./analyze/measure.ts";
export { writeReport, type ReportOptions, type ReportResult } from "./report/write.ts";
export { startDashboard } from "./dashboard/server.ts";
