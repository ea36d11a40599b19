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
