import type { EndCause, RunEnd } from "../record/types.ts";

const GPU_OOM_PATTERNS: readonly RegExp[] = [
  /CUDA out of memory/,
  /OutOfMemoryError/,
  /CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED/,
  /RESOURCE_EXHAUSTED.*[Oo]ut of memory|RESOURCE_EXHAUSTED: Failed to allocate/,
  /Resource exhausted: Out of memory/,
  /ResourceExhaustedError/,
  /HIP out of memory/,
];
const HOST_OOM_PATTERNS: readonly RegExp[] = [/DefaultCPUAllocator: can't allocate memory/, /^MemoryError\b/];

/** Which kind of out-of-memory an output line reports, if any. */
export type OomKind = "gpu" | "host";

/**
 * Scans one line of a job's output for a framework's out-of-memory message (PyTorch, JAX,
 * TensorFlow on the GPU; PyTorch's CPU allocator and Python's MemoryError on the host).
 *
 * @example
 * ```ts
 * oomInLine("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.22 GiB."); // "gpu"
 * oomInLine("step 10 loss 0.3");                                                       // null
 * ```
 */
export function oomInLine(line: string): OomKind | null {
  if (GPU_OOM_PATTERNS.some((pattern) => pattern.test(line))) return "gpu";
  if (HOST_OOM_PATTERNS.some((pattern) => pattern.test(line))) return "host";
  return null;
}

/** Why brim itself ended the job, when it did. */
export type BrimStopReason = "interrupted" | "cap_exceeded" | "hung" | "store_failed" | "guard_failed" | "budget";

/** Everything the classifier looks at. */
export interface EndEvidence {
  exitCode: number | null;
  signal: string | null;
  stoppedBy: BrimStopReason | null;
  /** Set when brim stopped the job: the one line that says why (cap numbers, seconds without a step). */
  stopDetail?: string;
  /** The SDK reported `oom_fatal`. */
  sdkOomFatal: boolean;
  /** The last out-of-memory line seen in the output, and its kind. */
  oomLine: { kind: OomKind; line: string } | null;
  /** NVML reported the GPU lost (or an Xid) during the run. */
  gpuLost: boolean;
}

/**
 * Classifies how a job ended. Order matters: what brim did itself first (it knows why), then a lost
 * GPU, then out-of-memory evidence, then a SIGKILL nobody in brim sent (the kernel's OOM killer is the
 * usual sender), then the exit status.
 *
 * @example
 * ```ts
 * classifyEnd({ exitCode: null, signal: "SIGKILL", stoppedBy: null, sdkOomFatal: false, oomLine: null, gpuLost: false }).cause;
 * // "host_oom"
 * ```
 */
export function classifyEnd(evidence: EndEvidence): RunEnd {
  const { exitCode, signal } = evidence;
  const status = signal === null ? `exit code ${exitCode ?? "?"}` : `signal ${signal}`;
  const end = (cause: EndCause, message: string): RunEnd => ({ cause, exit_code: exitCode, signal, message });

  if (evidence.stoppedBy === "budget") return end("ok", `${evidence.stopDetail ?? "the step budget was reached"}; brim ended the job there (${status})`);
  if (evidence.stoppedBy === "interrupted") return end("interrupted", `interrupted by the user (${status}); the timeline so far is kept`);
  if (evidence.stoppedBy === "cap_exceeded") {
    return end(
      "cap_exceeded",
      `${evidence.stopDetail ?? "the job went over the memory cap"}; brim stopped it. Lower the micro-batch (brim tune finds one that fits) or raise --cap`,
    );
  }
  if (evidence.stoppedBy === "hung") {
    return end(
      "hung",
      /ranks stalled/.test(evidence.stopDetail ?? "")
        ? `${evidence.stopDetail}; brim ended the ranks. Every rank's stacks are in the run's stacks/ folder (brim doctor names where each was); raise --hang-after if a step can take this long`
        : /stacks in /.test(evidence.stopDetail ?? "")
          ? `${evidence.stopDetail}; brim stopped it`
          : `${evidence.stopDetail ?? "no training step for too long"}; brim stopped it. Look at the end of output.log for where it was stuck, or raise --hung-after`,
    );
  }
  if (evidence.stoppedBy === "store_failed") {
    return end(
      "store_failed",
      `${evidence.stopDetail ?? "the run store refused a write"}; brim stopped the job rather than run it unrecorded. Free space in the store or pass --store`,
    );
  }
  if (evidence.stoppedBy === "guard_failed") {
    return end("supervisor_lost", `${evidence.stopDetail ?? "brim's guard failed"}; brim stopped the job rather than leave it unguarded`);
  }
  if (evidence.gpuLost)
    return end("gpu_fault", `the GPU reported a fault (fallen off the bus or Xid) during the run (${status}); check 'nvidia-smi' and the kernel log (dmesg)`);
  const failed = exitCode !== 0 || signal !== null;
  if (failed && (evidence.sdkOomFatal || evidence.oomLine?.kind === "gpu")) {
    const what = evidence.oomLine?.kind === "gpu" ? `: ${truncate(evidence.oomLine.line)}` : "";
    return end("gpu_oom", `the job ran out of GPU memory (${status})${what}. Lower the micro-batch or let brim find one: brim tune`);
  }
  if (failed && evidence.oomLine?.kind === "host") {
    return end(
      "host_oom",
      `the job ran out of host memory (${status}): ${truncate(evidence.oomLine.line)}. Fewer loader workers, a smaller batch, or more RAM`,
    );
  }
  if (signal === "SIGKILL") {
    return end(
      "host_oom",
      "the job was killed with SIGKILL by something other than brim, most likely the kernel's out-of-memory killer (check 'dmesg | grep -i oom'); fewer loader workers or a smaller batch need less RAM",
    );
  }
  if (signal !== null) return end("crashed", `the job was killed by ${signal}`);
  if (exitCode === 0) return end("ok", "finished normally");
  return end("crashed", `the job failed with exit code ${exitCode ?? "?"}; the last lines of its output are above and in output.log`);
}

function truncate(line: string): string {
  const trimmed = line.trim();
  return trimmed.length > 160 ? `${trimmed.slice(0, 157)}...` : trimmed;
}
