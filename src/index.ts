/**
 * brim's public API: plan the memory of a training job for any GPU.
 *
 * @example
 * ```ts
 * import { readFileSync } from "node:fs";
 * import { parseModelFile, plan } from "brim";
 * const model = parseModelFile(readFileSync("examples/nbeats/model.yaml", "utf8"), "model.yaml");
 * const report = plan(model, { gpu: "rtx-3060", precision: "bf16-mixed" });
 * console.log(report.max_micro_batch, report.memory.peak_bytes);
 *
 * // tune a job on real trials, then write the winner into its config
 * import { openDevices, RunStore, tune, applyTune } from "brim";
 * const result = await tune({ command: ["python", "train.py", "--config", "config.yaml"], cwd: process.cwd(),
 *   maxTrials: 12, maxTimeS: 900, warmupSteps: 3, measureSteps: 20, trialTimeLimitS: 300 },
 *   { devices: openDevices(), store: new RunStore(".brim") });
 * await applyTune(result.record, { force: false, dryRun: false });
 * ```
 * @module
 */
export { BrimError, InputError, UsageError, ERROR_CODES, isBrimError, type ErrorCode } from "./errors/index.ts";
export { parseByteSize, formatBytes } from "./bytes.ts";
export { plan, type PlanOptions, type PlanReport, type PlanSection, type Suggestion, type Assumption } from "./plan/planner.ts";
export { parseModelFile, type ModelInput } from "./plan/model-file.ts";
export { parseModelSpec, PRECISIONS, OPTIMIZERS, FAMILIES, type ModelSpec, type Precision, type Optimizer } from "./plan/spec.ts";
export { GPU_CATALOG, findGpu, gpuIds, type GpuSpec, type GpuArchitecture } from "./plan/catalog.ts";
export { DEFAULT_CONSTANTS, type Calibration, type PlanConstants } from "./plan/constants.ts";
export { SHARDINGS, COMPONENTS, type Sharding, type Component } from "./plan/memory.ts";
export { modelProfileSchema, type ModelProfile } from "./plan/profile.ts";
export { openDevices, startSampler, type Devices, type DeviceInventory, type Reading, type Sampler } from "./devices/index.ts";
export { Job, type JobOptions, type JobResult } from "./job/runner.ts";
export { classifyEnd, oomInLine } from "./job/classify.ts";
export { guardRun, type GuardOptions, type GuardResult } from "./guard/guard.ts";
export { RunStore, storeRoot, isRecordId, parseTimeline } from "./record/store.ts";
export { summarizeRun } from "./record/summary.ts";
export type { RunMeta, RunSummary, RunEnd, EndCause, TimelineEntry, TuneRecord } from "./record/types.ts";
export { tune, type TuneOptions, type TuneResult } from "./tune/tune.ts";
export { applyTune, type ApplyTuneResult } from "./tune/apply.ts";
export { searchKnobs, doublingBisection, exhaustiveGrid, type Knobs, type KnobValue, type TrialResult, type TrialRunner, type TuneSpace, type SearchOutcome } from "./tune/search.ts";
export { readConfig, editConfigText, applyConfigEdits, writeFileAtomic, unifiedDiff, type ConfigDocument, type ConfigEdit } from "./configs/index.ts";
export { diagnose, type DoctorReport } from "./analyze/doctor/index.ts";
export { writeReport } from "./report/write.ts";
export { startDashboard } from "./dashboard/server.ts";
