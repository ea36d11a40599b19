import { formatBytes } from "../bytes.ts";
import { InputError } from "../errors/index.ts";
import { ambiguousGpu, findGpu, GPU_CATALOG, type GpuSpec } from "./catalog.ts";

/** The GPU a plan is for: a catalog card, or any card by its memory. */
export interface ResolvedGpu {
  id: string;
  name: string;
  memoryBytes: number;
  memorySource: string;
  spec: GpuSpec | undefined;
}

/**
 * The GPU named by `--gpu` (catalog id or alias) or sized by `--gpu-memory`; an unknown or ambiguous
 * name is an InputError that names the closest ids.
 *
 * @example
 * ```ts
 * resolveGpu({ gpu: "a100-80gb" }).memoryBytes; // 80 GiB
 * ```
 */
export function resolveGpu(options: { gpu?: string | undefined; gpuMemoryBytes?: number | undefined }): ResolvedGpu {
  if (options.gpu !== undefined) {
    const spec = findGpu(options.gpu);
    if (spec === undefined) {
      const several = ambiguousGpu(options.gpu);
      if (several !== undefined) {
        const which = several.map((g) => `${g.id} (${g.name.replace(/^NVIDIA /, "")}, ${g.memoryGiB} GB, ${g.architecture})`);
        throw new InputError(`${JSON.stringify(options.gpu)} could be ${which.slice(0, -1).join(", ")} or ${which.at(-1) ?? ""}: name one with --gpu`, {
          field: "--gpu",
          code: "E_UNKNOWN_GPU",
        });
      }
      const close = closestIds(options.gpu);
      const hint = `${close.length > 0 ? `did you mean ${close.slice(0, 4).join(", ")}? ` : ""}see \`brim plan --list-gpus\`, or give any card's memory with --gpu-memory <GiB>`;
      throw new InputError(`unknown GPU ${JSON.stringify(options.gpu)}; ${hint}`, { field: "--gpu", code: "E_UNKNOWN_GPU" });
    }
    const memoryBytes = options.gpuMemoryBytes ?? (spec.reportedTotalMiB !== undefined ? spec.reportedTotalMiB * 2 ** 20 : spec.memoryGiB * 2 ** 30);
    const memorySource =
      options.gpuMemoryBytes !== undefined
        ? "--gpu-memory"
        : spec.reportedTotalMiB !== undefined
          ? "total the driver reports (catalog)"
          : "memory as sold (catalog); the driver may report slightly less";
    return { id: spec.id, name: spec.name, memoryBytes, memorySource, spec };
  }
  if (options.gpuMemoryBytes !== undefined) {
    return {
      id: "custom",
      name: `GPU with ${formatBytes(options.gpuMemoryBytes)}`,
      memoryBytes: options.gpuMemoryBytes,
      memorySource: "--gpu-memory",
      spec: undefined,
    };
  }
  throw new InputError("name the GPU to plan for: --gpu <id> (e.g. rtx-4090) or --gpu-memory <GiB>", { field: "--gpu" });
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

function closestIds(wanted: string): string[] {
  const w = wanted.toLowerCase();
  return GPU_CATALOG.map((gpu) => ({
    id: gpu.id,
    d: Math.min(...[gpu.id, ...gpu.aliases].map((name) => (name.includes(w) || w.includes(name) ? 0 : editDistance(w, name)))),
  }))
    .filter((x) => x.d <= Math.max(3, Math.floor(w.length / 3)))
    .sort((a, b) => a.d - b.d)
    .slice(0, 3)
    .map((x) => x.id);
}
