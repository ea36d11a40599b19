/**
 * The plan seeds the first memory probe: when the job's config names a model spec (`model.spec:
 * model.yaml`, the file `brim plan` reads) and brim knows the GPU, the planner's memory model gives
 * the bytes per sample and the fixed bytes, and the search's first probe goes toward the plan's
 * largest micro-batch instead of ×4 steps. Read-only use of src/plan; GPU only (the plan is of GPU
 * memory, a CPU tune's cap is RAM).
 *
 * @example
 * ```ts
 * const prior = await planPrior(document.data, "/proj/examples/nbeats", { backend: "nvml", gpus: [{ name: "NVIDIA H100 80GB HBM3", totalBytes: 8.5e10 }] }, 7.7e10, "fp32");
 * prior?.bytesPerSample; // from the plan's memory model
 * ```
 * @module
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { findGpu } from "../plan/catalog.ts";
import { parseModelFile } from "../plan/model-file.ts";
import { plan } from "../plan/planner.ts";
import { PRECISIONS, type Precision } from "../plan/spec.ts";

/** What the search takes from the plan. */
export interface PlanPrior {
  fixedBytes: number;
  bytesPerSample: number;
  maxMicroBatch?: number;
  /** where it came from, for the notes */
  source: string;
}

/** The model spec a config names: `model.spec`, `model_spec` or `spec` at the top. */
function specPath(config: unknown): string | null {
  if (typeof config !== "object" || config === null) return null;
  const c = config as Record<string, unknown>;
  const model = c.model;
  const candidates = [typeof model === "object" && model !== null ? (model as Record<string, unknown>).spec : undefined, c.model_spec, c.spec];
  const found = candidates.find((v): v is string => typeof v === "string" && /\.(ya?ml|json)$/i.test(v));
  return found ?? null;
}

/**
 * The plan's memory of the job's model on the first GPU, as a prior for the search; null when the
 * config names no spec, the GPU is unknown, or the spec does not plan (the tune goes on without).
 *
 * @example
 * ```ts
 * await planPrior({ model: { spec: "model.yaml" } }, dir, inventory, capBytes, "bf16-mixed");
 * ```
 */
export async function planPrior(
  config: unknown,
  configDir: string,
  inventory: { backend: string; gpus: readonly { name: string; totalBytes: number }[] },
  capBytes: number,
  precision: unknown,
): Promise<PlanPrior | null> {
  const gpu = inventory.gpus[0];
  if (inventory.backend === "cpu" || gpu === undefined) return null;
  const spec = findGpu(gpu.name);
  const file = specPath(config);
  if (spec === undefined || file === null) return null;
  try {
    const path = resolve(configDir, file);
    const model = parseModelFile(await readFile(path, "utf8"), path);
    const p: Precision | undefined =
      typeof precision === "string" && (PRECISIONS as readonly string[]).includes(precision) ? (precision as Precision) : undefined;
    const at = (batch: number): ReturnType<typeof plan> =>
      plan(model, {
        gpu: spec.id,
        gpuMemoryBytes: gpu.totalBytes,
        capBytes: Math.min(capBytes, gpu.totalBytes),
        margin: 0,
        batch,
        ...(p !== undefined ? { precision: p } : {}),
      });
    // at small micro-batches a fixed temporary (the optimizer step's) can be the peak: read the slope where the batch decides it
    const largest = at(1).max_micro_batch;
    const m1 = Math.max(1, Math.floor(largest / 4));
    const one = at(m1);
    const two = at(2 * m1);
    const bytesPerSample = (two.memory.peak_bytes - one.memory.peak_bytes) / m1;
    if (!(bytesPerSample > 0)) return null;
    return {
      fixedBytes: Math.max(0, one.memory.peak_bytes - bytesPerSample * m1),
      bytesPerSample,
      maxMicroBatch: largest,
      source: `brim plan of ${file} on ${spec.id}`,
    };
  } catch {
    return null;
  }
}
