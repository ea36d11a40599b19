/**
 * The `gpu_contexts` check of `brim doctor` (docs/doctor.md).
 *
 * @module
 */
import { formatBytes } from "../../bytes.ts";
import { formatMaybeBytes, formatShare } from "../../format.ts";
import { maxOf } from "../../stats.ts";
import * as T from "../thresholds.ts";
import { ev, finding, jobGpus, type CheckResult, type Ctx } from "./context.ts";
import type { Evidence } from "./types.ts";

export function gpuContexts(ctx: Ctx): CheckResult {
  const { m, tl } = ctx;
  if (!ctx.gpu) return { check: "gpu_contexts", reason: "CPU run: no GPU contexts" };
  const treeBytes = tl.samples.map((s) => s.tree.gpu_bytes).filter((v): v is number => v !== null);
  if (treeBytes.length === 0)
    return { check: "gpu_contexts", reason: "GPU memory per process was not recorded (nvidia-smi fallback, or process ids hidden by a container)" };
  const treeCount = maxOf(tl.samples.map((s) => s.tree.gpu_pids)) ?? 0;
  const deviceCount = maxOf(tl.samples.flatMap((s) => jobGpus(ctx, s).map((g) => g.processes))) ?? 0;
  // The driver's list per GPU may include other users' processes: the tree's own count wins.
  const processes = treeCount > 0 ? treeCount : deviceCount;
  const countedBy =
    treeCount > 0 ? "NVML counted the job's processes holding memory" : "NVML's process list of the GPU (may include processes outside the job)";
  const peak = maxOf(treeBytes) ?? 0;
  const framework = m.framework_peak_reserved_bytes;
  const extra = framework === null ? null : peak - framework;
  const total = m.gpu?.total_bytes ?? null;
  const jaxVersion = tl.hellos.find((h) => h.framework === "jax" || "jax" in h.versions) ?? null;
  const jax = jaxVersion !== null || "jax" in ctx.meta.versions || tl.events.some((e) => e.event === "framework_loaded" && e.details.name === "jax");
  const startT = tl.start?.t ?? tl.samples[0]?.t ?? 0;
  const early = tl.samples
    .filter((s) => s.t - startT <= 30)
    .map((s) => s.tree.gpu_bytes)
    .filter((v): v is number => v !== null);
  const earlyMax = maxOf(early);
  const preallocated = total !== null && earlyMax !== null && earlyMax >= T.PREALLOCATION_SHARE * total && (framework === null || framework < 0.5 * earlyMax);
  const many = processes >= 2 && extra !== null && extra >= T.EXTRA_GPU_MEMORY_BYTES;
  const unexplained = processes === 0 && extra !== null && extra >= 2 * T.EXTRA_GPU_MEMORY_BYTES;
  if (!many && !preallocated && !unexplained) {
    return {
      check: "gpu_contexts",
      why: `${processes > 0 ? `${processes} process${processes === 1 ? "" : "es"} held GPU memory` : "GPU memory"}${extra !== null ? `; ${formatBytes(Math.max(0, extra))} outside PyTorch's allocator` : ""}`,
    };
  }
  const evidence: Evidence[] = [
    ev("process tree GPU memory", peak, "bytes", `the job's processes held ${formatBytes(peak)} of GPU memory together at the peak`),
  ];
  if (processes > 0)
    evidence.push(
      ev(
        "processes with a GPU context",
        processes,
        "count",
        `${processes} processes of the job held GPU memory at once (each CUDA context costs ~300–600 MiB before any tensor)`,
      ),
    );
  if (extra !== null && framework !== null)
    evidence.push(
      ev(
        "outside the main allocator",
        extra,
        "bytes",
        `${formatBytes(extra)} beyond the ${formatBytes(framework)} PyTorch's allocator reserved in the main process`,
      ),
    );
  if (preallocated && earlyMax !== null && total !== null)
    evidence.push(
      ev(
        "held right after start",
        earlyMax,
        "bytes",
        `${formatBytes(earlyMax)} (${formatShare(earlyMax / total)} of the card) held within 30 s of start: a framework preallocating`,
      ),
    );
  if (jax) evidence.push(ev("JAX", true, "text", "JAX is loaded in the job (it preallocates 75 % of the card by default)"));
  const steps: string[] = [];
  if (jax || preallocated) {
    steps.push(
      "Stop JAX preallocating: XLA_PYTHON_CLIENT_PREALLOCATE=false, or give it a share: XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 (set before JAX starts; brim.apply_jax_cap() does it from the cap). TensorFlow: TF_FORCE_GPU_ALLOW_GROWTH=true.",
    );
  }
  if (processes >= 2) {
    steps.push("Run environments or helper processes without the GPU: CUDA_VISIBLE_DEVICES= in their environment, and do not touch torch.cuda in them.");
    steps.push("Consolidate: step all environments in one process as a batch (a vectorised env on tensors) so one CUDA context serves them all.");
  }
  if (!jax && !preallocated && processes < 2)
    steps.push("Find what holds the memory: nvidia-smi --query-compute-apps=pid,used_memory --format=csv while the job runs.");
  return finding(ctx, {
    id: "gpu_contexts",
    title: preallocated || jax ? "A framework preallocates GPU memory" : "Many processes each hold a GPU context",
    severity: extra !== null && total !== null && extra >= 0.25 * total ? "high" : "medium",
    confidence: {
      level: (processes >= 2 && treeCount > 0) || preallocated ? "high" : processes >= 2 ? "medium" : "low",
      reason:
        processes >= 2
          ? countedBy
          : preallocated
            ? "the memory held right after start matches preallocation"
            : "inferred from memory outside PyTorch's allocator; the processes were not counted",
    },
    summary: `${processes >= 2 ? `${processes} processes` : "The job"} hold${processes >= 2 ? "" : "s"} ${formatMaybeBytes(extra)} of GPU memory outside the training process's allocator${preallocated ? ", most of it taken at start by a preallocating framework" : ""}: memory the model cannot use.`,
    evidence,
    fix: { summary: jax || preallocated ? "disable preallocation" : "one GPU context per GPU", steps },
    knobs: [],
  });
}
