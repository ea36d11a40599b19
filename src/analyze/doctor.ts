/**
 * `brim doctor`'s analysis: findings about a recorded run, each with the numbers that show it, a fix
 * in the user's terms, how sure it is, and where a knob can verify the fix, the `brim tune` command
 * that does. Pure: it reads a run's metadata and timeline, nothing else.
 *
 * @module
 */
import { formatBytes } from "../bytes.ts";
import type { RunMeta, TimelineEntry } from "../record/types.ts";
import { formatMaybeBytes, formatPercent, formatRate, formatSeconds, formatShare } from "./format.ts";
import { maxOf, mean, measureRun, minOf, steadySamples, type RunMeasures } from "./measure.ts";
import * as T from "./thresholds.ts";
import { readTimeline, stepStart, type EventEntry, type GpuReading, type SampleEntry, type StepEntry, type Timeline } from "./timeline.ts";
import { tuneCommandLine, type KnobTrial } from "./tune-hint.ts";

/**
 * Every check the doctor runs, in the order it runs them.
 *
 * @example
 * ```ts
 * CHECKS.includes("data_starved"); // true
 * ```
 */
export const CHECKS = [
  "data_starved",
  "launch_bound",
  "memory_unused",
  "fp32_on_tensor_cores",
  "nonfinite_loss",
  "oom_recovered",
  "pcie_traffic",
  "clocks_held_back",
  "gpu_contexts",
  "utilization_gap",
  "cpu_run",
] as const;

/**
 * One of {@link CHECKS}.
 *
 * @example
 * ```ts
 * const id: CheckId = "memory_unused";
 * ```
 */
export type CheckId = (typeof CHECKS)[number];

/**
 * How much a finding costs the run. `info` explains without asking for a change.
 *
 * @example
 * ```ts
 * const s: Severity = "high";
 * ```
 */
export type Severity = "high" | "medium" | "low" | "info";

/**
 * How sure a finding is.
 *
 * @example
 * ```ts
 * const c: Certainty = "medium";
 * ```
 */
export type Certainty = "high" | "medium" | "low";

/**
 * One number that shows a finding.
 *
 * @example
 * ```ts
 * const e: Evidence = { label: "data wait share", value: 0.31, unit: "share", text: "31.0 % of step time ..." };
 * ```
 */
export interface Evidence {
  /** short name of the quantity, e.g. "data wait share" */
  label: string;
  /** the raw value in the unit named (shares 0–1, bytes, seconds, percent 0–100) */
  value: number | string | boolean | null;
  unit: "share" | "bytes" | "s" | "percent" | "count" | "bytes/s" | "samples/s" | "MHz" | "text";
  /** the value as a person reads it, with its context */
  text: string;
}

/**
 * A finding about a run.
 *
 * @example
 * ```ts
 * report.findings.map((f: Finding) => `${f.title}: ${f.verify ?? "no knob"}`);
 * ```
 */
export interface Finding {
  id: CheckId;
  title: string;
  severity: Severity;
  confidence: { level: Certainty; reason: string };
  /** what is happening, in plain words */
  summary: string;
  evidence: Evidence[];
  fix: { summary: string; steps: string[] };
  /** knobs a tune should try to verify the fix */
  knobs: KnobTrial[];
  /** the `brim tune` command line that verifies the fix, where a knob can */
  verify: string | null;
}

/**
 * A check that could not run on this run, and why.
 *
 * @example
 * ```ts
 * report.not_evaluated.map((n: NotEvaluated) => `${n.check}: ${n.reason}`);
 * ```
 */
export interface NotEvaluated {
  check: CheckId;
  reason: string;
}

/**
 * A check that ran and found nothing to report.
 *
 * @example
 * ```ts
 * report.passed.map((p: Passed) => `${p.check}: ${p.why}`);
 * ```
 */
export interface Passed {
  check: CheckId;
  why: string;
}

/**
 * What `brim doctor` says about a run.
 *
 * @example
 * ```ts
 * const report: DoctorReport = diagnose(meta, timeline);
 * report.findings[0]?.id; // "data_starved"
 * ```
 */
export interface DoctorReport {
  schema: "brim.doctor/v1";
  run: {
    id: string;
    kind: "run" | "trial";
    command: string[];
    device: string;
    backend: RunMeta["device"]["backend"];
    started_at: string;
    ended_at: string | null;
    end: string | null;
    running: boolean;
  };
  measures: RunMeasures;
  findings: Finding[];
  passed: Passed[];
  not_evaluated: NotEvaluated[];
  notes: string[];
}

interface Ctx {
  meta: RunMeta;
  tl: Timeline;
  m: RunMeasures;
  steady: StepEntry[];
  samples: SampleEntry[];
  gpu: boolean;
}

type CheckResult = Finding | NotEvaluated | Passed;

const SEVERITY_ORDER: Record<Severity, number> = { high: 0, medium: 1, low: 2, info: 3 };
const CERTAINTY_ORDER: Record<Certainty, number> = { high: 0, medium: 1, low: 2 };

function ev(label: string, value: Evidence["value"], unit: Evidence["unit"], text: string): Evidence {
  return { label, value, unit, text };
}

function stepsConfidence(n: number): { level: Certainty; why: string } {
  if (n >= T.STEPS_FOR_HIGH_CONFIDENCE) return { level: "high", why: `${n} steady steps` };
  if (n >= T.STEPS_FOR_MEDIUM_CONFIDENCE) return { level: "medium", why: `only ${n} steady steps (high needs ${T.STEPS_FOR_HIGH_CONFIDENCE})` };
  return { level: "low", why: `only ${n} steady step${n === 1 ? "" : "s"}` };
}

function lower(a: Certainty, b: Certainty): Certainty {
  return CERTAINTY_ORDER[a] >= CERTAINTY_ORDER[b] ? a : b;
}

function jobGpus(ctx: Ctx, s: SampleEntry): GpuReading[] {
  return s.gpus.filter((g) => ctx.m.gpu_indexes.includes(g.index));
}

function finding(ctx: Ctx, f: Omit<Finding, "verify">): Finding {
  return { ...f, verify: f.knobs.length > 0 ? tuneCommandLine(ctx.meta.command, f.knobs) : null };
}

function powersUpTo(from: number, limit: number, count: number): number[] {
  const out = [from];
  let v = Math.max(1, from);
  while (out.length < count) {
    v *= 2;
    if (v > limit) break;
    out.push(v);
  }
  return out;
}

function workerValues(current: number | null, cpus: number | null): number[] {
  const limit = Math.max(2, Math.min(16, (cpus ?? 4) - 1));
  const values = new Set<number>([current ?? 0]);
  for (const w of [2, 4, 8, 16]) if (w <= limit && w > (current ?? 0)) values.add(w);
  return [...values].sort((a, b) => a - b).slice(0, 4);
}

function knobSeen(ctx: Ctx, name: string): boolean {
  return name in ctx.meta.knobs || ctx.tl.events.some((e) => e.event === "knob_read" && e.details.name === name);
}

/** The step a sampler reading fell in, and whether in its data wait or its compute. */
function phaseAt(steps: readonly StepEntry[], t: number): "wait" | "compute" | null {
  let lo = 0;
  let hi = steps.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const s = steps[mid] as StepEntry;
    if (s.t < t) lo = mid + 1;
    else hi = mid - 1;
  }
  const s = steps[lo];
  if (s === undefined || t < stepStart(s)) return null;
  return t < stepStart(s) + s.wait_s ? "wait" : "compute";
}

// ---------------------------------------------------------------- checks

function dataStarved(ctx: Ctx): CheckResult {
  const { m, steady } = ctx;
  if (steady.length === 0 || m.data_wait_share === null) {
    return { check: "data_starved", reason: "no steady step reports from the job: wrap the loader in brim.track(...) so brim can time the wait for each batch" };
  }
  if (m.data_wait_share < T.DATA_WAIT_SHARE) {
    return { check: "data_starved", why: `data wait is ${formatShare(m.data_wait_share)} of step time (below ${formatShare(T.DATA_WAIT_SHARE)})` };
  }
  const waitingSteps = steady.filter((s) => s.wait_s + s.compute_s > 0 && s.wait_s / (s.wait_s + s.compute_s) >= T.DATA_WAIT_SHARE).length;
  const evidence: Evidence[] = [
    ev("data wait share", m.data_wait_share, "share", `${formatShare(m.data_wait_share)} of step time is spent waiting for the next batch (Σ wait / Σ step time over ${steady.length} steady steps)`),
    ev("median wait per step", m.wait_time_s, "s", `median wait ${formatSeconds(m.wait_time_s)} against median compute ${formatSeconds(m.compute_time_s)} per step`),
    ev("steps that waited", waitingSteps, "count", `${waitingSteps} of ${steady.length} steps waited ${formatShare(T.DATA_WAIT_SHARE)} of their time or more`),
  ];
  const workers = m.num_workers;
  const processes = (workers ?? 0) + 1;
  const perProcess = m.tree_cpu_percent_mean === null ? null : m.tree_cpu_percent_mean / processes;
  const loaderSaturated = perProcess !== null && perProcess >= T.LOADER_CPU_SATURATED_PERCENT;
  // Only the job's own use of the host rules workers out: a host kept busy by other work still
  // gives extra workers a share of its cores, and workers overlap loading with compute.
  const jobHostShare = m.tree_cpu_percent_mean === null || m.host_cpus === null ? null : (m.tree_cpu_percent_mean / (100 * m.host_cpus)) * 100;
  const hostSaturated = jobHostShare !== null && jobHostShare >= T.HOST_CPU_SATURATED_PERCENT;
  const othersBusy = !hostSaturated && m.host_cpu_percent_mean !== null && m.host_cpu_percent_mean >= T.HOST_CPU_SATURATED_PERCENT;
  if (m.tree_cpu_percent_mean !== null) {
    evidence.push(
      ev(
        "CPU of the job's processes",
        m.tree_cpu_percent_mean,
        "percent",
        `the job's process tree used ${formatPercent(m.tree_cpu_percent_mean)} CPU (100 % = one core) with ${workers === null ? "an unknown number of" : workers} loader worker${workers === 1 ? "" : "s"}` +
          (perProcess !== null ? `: ${formatPercent(perProcess)} per loading process${loaderSaturated ? ", saturated" : ""}` : ""),
      ),
    );
  }
  if (m.host_cpu_percent_mean !== null) {
    const whose = hostSaturated ? ", nearly all by the job itself: no core to spare" : othersBusy ? ", mostly by other work: workers will share the cores with it" : "";
    evidence.push(ev("host CPU", m.host_cpu_percent_mean, "percent", `the host's CPUs were ${formatPercent(m.host_cpu_percent_mean)} busy over ${m.host_cpus ?? "?"} cores${whose}`));
  }
  if (ctx.gpu) {
    const byPhase = { wait: [] as number[], compute: [] as number[] };
    for (const s of ctx.samples) {
      const phase = phaseAt(steady, s.t);
      if (phase === null) continue;
      for (const g of jobGpus(ctx, s)) if (g.util !== null) byPhase[phase].push(g.util);
    }
    const uw = mean(byPhase.wait);
    const uc = mean(byPhase.compute);
    if (uw !== null && uc !== null && byPhase.wait.length >= 3 && byPhase.compute.length >= 3) {
      const caveat = (m.wait_time_s ?? 0) < 0.2 ? " (waits are shorter than NVML's 1/6–1 s averaging window, so the contrast is blurred)" : "";
      evidence.push(ev("GPU utilization while waiting", uw, "percent", `GPU utilization ${formatPercent(uw)} in readings taken while the job waited for data, ${formatPercent(uc)} while it computed${caveat}`));
    }
  }
  const steps: string[] = [];
  const suggested = workerValues(workers, m.host_cpus);
  const next = suggested.find((w) => w > (workers ?? 0));
  if (hostSaturated) {
    steps.push(`The job already keeps ${formatPercent(jobHostShare)} of the host's ${m.host_cpus ?? "?"} cores busy: more loader workers cannot help. Make each batch cheaper instead (below).`);
  } else if (workers === null || workers === 0) {
    steps.push(`Load batches in worker processes: DataLoader(num_workers=${next ?? 2}, persistent_workers=True, prefetch_factor=4) (config key data_loader.num_workers, knob num_workers).`);
  } else if (loaderSaturated && next !== undefined) {
    steps.push(`The ${workers} workers are saturated: raise num_workers to ${next} (the host has ${m.host_cpus ?? "?"} cores).`);
  } else if (perProcess !== null && !loaderSaturated) {
    steps.push(`The ${workers} workers are not CPU-bound (${formatPercent(perProcess)} each): they wait on reading files. Raise num_workers${next !== undefined ? ` to ${next}` : ""} to have more reads in flight, with prefetch_factor=4 and persistent_workers=True.`);
  } else {
    steps.push(`Keep the ${workers} workers ahead of the ${ctx.gpu ? "GPU" : "training step"}: prefetch_factor=4 and persistent_workers=True (workers stay alive between epochs).`);
  }
  if (ctx.gpu) steps.push("Pin host memory (pin_memory=True) and copy with .to(device, non_blocking=True) so the copy overlaps compute.");
  steps.push(
    knobSeen(ctx, "gpu_augment")
      ? "Move augmentation to the GPU, batched (this job has the knob gpu_augment: set it to true)."
      : "Move per-sample augmentation out of the Dataset and run it batched on the training device.",
  );
  steps.push("Cache decoded or preprocessed data (e.g. one array file read with np.load(mmap_mode='r')) instead of decoding every sample every epoch.");
  const knobs: KnobTrial[] = [];
  if (!hostSaturated && suggested.length > 1) knobs.push({ name: "num_workers", values: suggested });
  if (knobSeen(ctx, "gpu_augment")) knobs.push({ name: "gpu_augment", values: [false, true] });
  if (ctx.gpu) knobs.push({ name: "pin_memory", values: [false, true] });
  const c = stepsConfidence(steady.length);
  const consistent = waitingSteps / steady.length;
  const level = consistent >= 0.5 ? c.level : lower(c.level, "medium");
  return finding(ctx, {
    id: "data_starved",
    title: "Starved by data",
    severity: m.data_wait_share >= T.DATA_WAIT_SHARE_SEVERE ? "high" : "medium",
    confidence: { level, reason: `${c.why}; ${formatShare(consistent)} of them waited for data` },
    summary: `The training loop waits for the next batch ${formatShare(m.data_wait_share)} of the time; ${ctx.gpu ? "the GPU has nothing to do meanwhile" : "the compute sits idle meanwhile"}.${
      workers === 0 || workers === null ? " Loading and augmentation run in the training process itself." : ""
    }`,
    evidence,
    fix: { summary: hostSaturated ? "make each batch cheaper to produce" : "produce batches in parallel, ahead of the training step", steps },
    knobs,
  });
}

function launchBound(ctx: Ctx): CheckResult {
  const { m } = ctx;
  if (!ctx.gpu) return { check: "launch_bound", reason: "CPU run: there are no GPU kernels to judge" };
  if (m.gpu_util_mean === null && m.sm_activity_mean === null) {
    return { check: "launch_bound", reason: "the sampler recorded no GPU utilization (NVML utilization not available, e.g. on MIG)" };
  }
  const mb = m.micro_batch;
  const evidence: Evidence[] = [];
  let summary: string;
  let level: Certainty;
  let reason: string;
  if (m.sm_activity_mean !== null && m.gpu_util_mean !== null) {
    if (!(m.gpu_util_mean >= T.UTIL_BUSY && m.sm_activity_mean <= T.SM_ACTIVITY_LOW)) {
      return { check: "launch_bound", why: `utilization ${formatPercent(m.gpu_util_mean)} with SM activity ${formatPercent(m.sm_activity_mean)}: kernels fill the SMs` };
    }
    evidence.push(ev("GPU utilization", m.gpu_util_mean, "percent", `NVML utilization ${formatPercent(m.gpu_util_mean)}: a kernel was running most of the time`));
    evidence.push(ev("SM activity", m.sm_activity_mean, "percent", `GPM SM activity ${formatPercent(m.sm_activity_mean)}: the running kernels kept only that share of the SMs busy`));
    summary = `The GPU looks busy (${formatPercent(m.gpu_util_mean)} utilization) but its SMs are mostly idle (${formatPercent(m.sm_activity_mean)} SM activity): the kernels are too small to fill the card.`;
    const n = ctx.samples.length;
    level = n >= T.SAMPLES_FOR_CONFIDENCE ? "high" : "medium";
    reason = `measured SM activity (GPM) over ${n} readings`;
  } else {
    const compute = m.compute_time_s;
    const waitShare = m.data_wait_share ?? 0;
    if (compute === null) return { check: "launch_bound", reason: "no steady step reports: step times are needed to judge step size without SM activity" };
    if (!(compute < T.SHORT_STEP_S && waitShare < T.DATA_WAIT_SHARE)) {
      return { check: "launch_bound", why: `median compute ${formatSeconds(compute)} per step (not below ${formatSeconds(T.SHORT_STEP_S)}); SM activity not recorded` };
    }
    evidence.push(ev("median compute per step", compute, "s", `a step computes for ${formatSeconds(compute)} (median): a few hundred kernel launches at 5–20 µs each take that long on their own`));
    if (m.gpu_util_mean !== null) evidence.push(ev("GPU utilization", m.gpu_util_mean, "percent", `NVML utilization ${formatPercent(m.gpu_util_mean)}`));
    summary = `Steps are very short (${formatSeconds(compute)} of compute): launching kernels and Python between them take as long as the kernels.`;
    level = lower(stepsConfidence(ctx.steady.length).level, "medium");
    reason = "judged from step time alone: SM activity (GPM, Hopper and newer) was not recorded";
  }
  if (mb !== null) evidence.push(ev("micro-batch", mb, "count", `micro-batch ${mb}`));
  const limit = suggestedMicroBatch(m);
  const values = mb === null ? [] : powersUpTo(mb, limit ?? mb * 8, 4);
  return finding(ctx, {
    id: "launch_bound",
    title: "Small, launch-bound steps",
    severity: "medium",
    confidence: { level, reason },
    summary,
    evidence,
    fix: {
      summary: "give each kernel more work, and launch fewer of them",
      steps: [
        mb === null ? "Raise the micro-batch (batch_size)." : `Raise the micro-batch from ${mb} to ${values.slice(1).join(" or ") || mb * 2}${limit !== null ? ` (memory allows about ${limit})` : ""}; lower accumulation to keep the effective batch.`,
        'Capture the step in a CUDA graph: torch.compile(model, mode="reduce-overhead"), or torch.cuda.graphs for a static step.',
        "torch.compile(model) also fuses small element-wise kernels.",
        "Remove per-step host syncs (loss.item(), printing tensors) from the loop.",
      ],
    },
    knobs: values.length > 1 ? [{ name: "batch_size", values }] : [],
  });
}

function suggestedMicroBatch(m: RunMeasures): number | null {
  const peak = m.peak_tree_gpu_bytes ?? m.framework_peak_reserved_bytes;
  if (m.micro_batch === null || peak === null || m.memory_limit_bytes === null || peak <= 0) return null;
  // Memory is fixed + per-sample × micro-batch, so peak / micro-batch over-states the per-sample cost:
  // scaling the whole peak is a conservative estimate of what fits.
  return Math.max(m.micro_batch, Math.floor((m.micro_batch * m.memory_limit_bytes * (1 - T.MEMORY_MARGIN)) / peak));
}

function memoryUnused(ctx: Ctx): CheckResult {
  const { m } = ctx;
  if (!ctx.gpu) return { check: "memory_unused", reason: "CPU run: GPU memory does not apply (RAM use is under cpu_run)" };
  const peak = m.peak_tree_gpu_bytes ?? m.framework_peak_reserved_bytes;
  const source = m.peak_tree_gpu_bytes !== null ? "NVML, summed over the process tree" : "PyTorch's reserved peak (NVML per-process memory was not recorded)";
  if (peak === null) return { check: "memory_unused", reason: "no GPU memory was recorded for the job" };
  if (m.memory_limit_bytes === null) return { check: "memory_unused", reason: "neither a cap nor the card's total memory is known" };
  const share = peak / m.memory_limit_bytes;
  const limitName = m.memory_limit_source === "cap" ? "the cap" : "the card's memory";
  if (m.oom_recoveries > 0) return { check: "memory_unused", why: `the run ran out of memory ${m.oom_recoveries} time(s): memory is not to spare` };
  if (share >= T.MEMORY_USED_SHARE_LOW) return { check: "memory_unused", why: `peak ${formatBytes(peak)} is ${formatShare(share)} of ${limitName}` };
  const mb = m.micro_batch;
  const acc = m.accumulation ?? 1;
  const fit = suggestedMicroBatch(m);
  const evidence: Evidence[] = [
    ev("peak GPU memory", peak, "bytes", `peak ${formatBytes(peak)} (${source})`),
    ev("memory limit", m.memory_limit_bytes, "bytes", `${limitName}: ${formatBytes(m.memory_limit_bytes)}`),
    ev("share used", share, "share", `the job used ${formatShare(share)} of ${limitName} at its peak`),
  ];
  if (m.framework_peak_allocated_bytes !== null) evidence.push(ev("framework peak allocated", m.framework_peak_allocated_bytes, "bytes", `PyTorch's tensors peaked at ${formatBytes(m.framework_peak_allocated_bytes)}`));
  if (mb !== null) evidence.push(ev("micro-batch", mb, "count", `micro-batch ${mb} × accumulation ${acc}`));
  const steps: string[] = [];
  const knobs: KnobTrial[] = [];
  if (mb !== null && fit !== null && fit > mb) {
    const factor = Math.max(1, Math.floor(fit / mb));
    let k = 1;
    while (k * 2 <= factor && acc % (k * 2) === 0) k *= 2;
    if (acc > 1 && k > 1) {
      steps.push(`Raise the micro-batch from ${mb} to ${mb * k} and lower accumulation from ${acc} to ${acc / k}: the same effective batch (${mb * acc}) in fewer, larger steps.`);
      knobs.push({ name: "batch_size", values: powersUpTo(mb, mb * k, 4) }, { name: "accumulation", values: powersUpTo(acc / k, acc, 4).reverse() });
    } else {
      steps.push(`Raise the micro-batch from ${mb} toward ${fit} (a conservative estimate: the whole peak scaled with the batch, ${formatShare(T.MEMORY_MARGIN)} kept free); scale the learning rate with the batch if the effective batch changes.`);
      knobs.push({ name: "batch_size", values: powersUpTo(mb, fit, 4) });
    }
  } else {
    steps.push("Raise the micro-batch (batch_size) and lower accumulation to keep the effective batch.");
  }
  steps.push("Let brim find the largest micro-batch that fits on real trials: brim tune measures peak memory per trial and fits a memory line.");
  const c = stepsConfidence(ctx.steady.length);
  return finding(ctx, {
    id: "memory_unused",
    title: "GPU memory left unused",
    severity: (m.gpu_util_mean !== null && m.gpu_util_mean < T.UTIL_BUSY) || (m.sm_activity_mean ?? 100) <= T.SM_ACTIVITY_LOW ? "medium" : "low",
    confidence: {
      level: m.peak_tree_gpu_bytes !== null ? lower("high", c.level === "low" ? "medium" : "high") : "medium",
      reason: m.peak_tree_gpu_bytes !== null ? "peak measured by NVML over the whole process tree" : "peak from PyTorch's allocator only; the CUDA context and other processes are not counted",
    },
    summary: `At its peak the job held ${formatBytes(peak)} of ${formatBytes(m.memory_limit_bytes)} (${formatShare(share)}); a larger micro-batch would use the card better.`,
    evidence,
    fix: { summary: "use the memory for larger micro-batches", steps },
    knobs,
  });
}

function fp32OnTensorCores(ctx: Ctx): CheckResult {
  const { m } = ctx;
  if (!ctx.gpu || m.gpu === null) return { check: "fp32_on_tensor_cores", reason: "CPU run: tensor cores do not apply" };
  if (m.gpu.tensor_cores === null) return { check: "fp32_on_tensor_cores", reason: `brim does not know whether ${m.gpu.name} has tensor cores` };
  if (m.precision === null) {
    return { check: "fp32_on_tensor_cores", reason: "the job did not report its precision: read it with brim.knob(\"precision\", ...) (or pass it as a knob) so brim can see it" };
  }
  if (!m.gpu.tensor_cores) return { check: "fp32_on_tensor_cores", why: `${m.gpu.name} has no tensor cores` };
  if (m.precision !== "fp32") return { check: "fp32_on_tensor_cores", why: `the job trains in ${m.precision}` };
  const target = m.gpu.bf16 === true ? "bf16-mixed" : "fp16-mixed";
  const arch = m.gpu.architecture ?? "?";
  const evidence: Evidence[] = [
    ev("precision", m.precision, "text", `precision fp32 (${m.precision_source === "knob_read" ? "as the job read its `precision` knob" : m.precision_source === "run_knobs" ? "from the run's knobs" : "after a fallback"})`),
    ev("GPU", m.gpu.name, "text", `${m.gpu.name} (${arch}) has tensor cores${m.gpu.bf16 === true ? " with bf16" : ""}`),
  ];
  if (m.gpu_util_mean !== null) evidence.push(ev("GPU utilization", m.gpu_util_mean, "percent", `utilization ${formatPercent(m.gpu_util_mean)}: ${m.gpu_util_mean >= T.UTIL_BUSY ? "compute-bound, so faster maths shows directly" : "the gain shows once the GPU is kept busy"}`));
  const steps = [
    `Train in ${target}: training.precision: ${target} (knob precision), or torch.autocast("cuda", dtype=torch.${target === "bf16-mixed" ? "bfloat16" : "float16"})${target === "fp16-mixed" ? " with a GradScaler" : ""}. Mixed precision also roughly halves activation memory.`,
  ];
  if (m.gpu.bf16 === true) steps.push("As a change with no numerical risk at all first: TF32 matmuls (torch.backends.cuda.matmul.allow_tf32 = True, knob tf32 / precision tf32).");
  if (m.gpu.bf16 !== true) steps.push(`${m.gpu.name} has no fast bf16: use fp16-mixed with loss scaling (GradScaler); watch for non-finite losses.`);
  return finding(ctx, {
    id: "fp32_on_tensor_cores",
    title: "fp32 on a card with tensor cores",
    severity: m.gpu_util_mean !== null && m.gpu_util_mean >= T.UTIL_BUSY ? "high" : "medium",
    confidence: {
      level: m.precision_source === "knob_read" ? "high" : "medium",
      reason: m.precision_source === "knob_read" ? "the job reported reading precision = fp32" : "precision from the run's knobs; the job did not confirm reading it",
    },
    summary: `The job trains in plain fp32 on ${m.gpu.name}, whose tensor cores run ${target} matmuls many times faster.`,
    evidence,
    fix: { summary: `switch to ${target}`, steps },
    knobs: [{ name: "precision", values: m.gpu.bf16 === true ? ["fp32", "tf32", "bf16-mixed"] : ["fp32", "fp16-mixed"] }],
  });
}

function nonfiniteLoss(ctx: Ctx): CheckResult {
  const nonfinite = ctx.tl.events.filter((e) => e.event === "nonfinite_loss");
  const fallbacks = ctx.tl.events.filter((e) => e.event === "precision_fallback");
  if (nonfinite.length === 0 && fallbacks.length === 0) return { check: "nonfinite_loss", why: "no non-finite losses and no precision fallback reported" };
  const evidence: Evidence[] = [];
  const precisionOf = (e: EventEntry | undefined): string | null => (e === undefined ? null : typeof e.details.precision === "string" ? e.details.precision : null);
  const from = typeof fallbacks[0]?.details.from === "string" ? fallbacks[0].details.from : precisionOf(nonfinite[0]);
  const unsupported = fallbacks.filter((e) => e.details.reason === "unsupported");
  const nanFallback = fallbacks.filter((e) => e.details.reason === "nonfinite_loss");
  if (nonfinite.length > 0) {
    const steps = nonfinite.map((e) => e.step).filter((s): s is number => s !== null);
    evidence.push(ev("non-finite losses", nonfinite.length, "count", `${nonfinite.length} step${nonfinite.length === 1 ? "" : "s"} with a NaN/inf loss under ${precisionOf(nonfinite[0]) ?? "mixed precision"}${steps.length > 0 ? ` (first at step ${minOf(steps) ?? "?"})` : ""}; their gradients were dropped`));
  }
  for (const f of fallbacks) {
    evidence.push(ev("precision fallback", `${String(f.details.from)} → ${String(f.details.to)}`, "text", `at step ${f.step ?? "?"}: ${String(f.details.from)} fell back to ${String(f.details.to)} (${String(f.details.reason)})${f.message !== null ? `: ${f.message}` : ""}`));
  }
  const bf16 = ctx.m.gpu?.bf16 ?? (ctx.gpu ? null : true);
  const steps: string[] = [];
  const knobs: KnobTrial[] = [];
  if (unsupported.length > 0 && nanFallback.length === 0 && nonfinite.length === 0) {
    const to = String(unsupported[0]?.details.to);
    steps.push(`Set the precision the device supports explicitly (precision: ${to}) so that the run's config says what actually runs.`);
    return finding(ctx, {
      id: "nonfinite_loss",
      title: "Precision not supported here",
      severity: "low",
      confidence: { level: "high", reason: "the SDK reported the fallback" },
      summary: `The requested ${from ?? "precision"} is not supported on this device; the SDK trained in ${to} instead.`,
      evidence,
      fix: { summary: `ask for ${to} directly`, steps },
      knobs,
    });
  }
  if (from === "fp16-mixed" && bf16 === true) {
    steps.push("Switch fp16-mixed to bf16-mixed: bf16 has fp32's exponent range, so losses and gradients do not overflow (no loss scaling needed).");
    knobs.push({ name: "precision", values: ["fp16-mixed", "bf16-mixed", "fp32"] });
  } else if (from === "fp16-mixed") {
    steps.push("This device has no fast bf16: keep fp16-mixed with a GradScaler and find what overflows (softmax/exp in fp16, a large loss sum), or keep fp32 for the unstable part (autocast(enabled=False) around it).");
    knobs.push({ name: "precision", values: ["fp16-mixed", "fp32"] });
  } else {
    steps.push("Non-finite losses under bf16 usually come from the model, not the format: lower the learning rate, clip gradients (clip_grad_norm=1.0), check inputs for NaN.");
    knobs.push({ name: "precision", values: [from ?? "bf16-mixed", "fp32"] });
  }
  if (nanFallback.length > 0) steps.push(`The run went on in ${String(nanFallback[0]?.details.to)} after the fallback: it trained correctly but at fp32 speed from step ${nanFallback[0]?.step ?? "?"}.`);
  steps.push("If the losses stay finite in fp32 only, keep fp32 for the loss and the last layers (autocast disabled there) and mixed precision elsewhere.");
  return finding(ctx, {
    id: "nonfinite_loss",
    title: "Mixed precision losses went non-finite",
    severity: nanFallback.length > 0 || nonfinite.length >= 3 ? "high" : "medium",
    confidence: { level: "high", reason: "reported by the SDK from the job's own losses" },
    summary: `Under ${from ?? "mixed precision"} ${nonfinite.length} loss${nonfinite.length === 1 ? " was" : "es were"} NaN/inf${nanFallback.length > 0 ? `, and the SDK fell back to ${String(nanFallback[0]?.details.to)}` : ""}.`,
    evidence,
    fix: { summary: from === "fp16-mixed" && bf16 === true ? "use bf16-mixed" : "stabilise the numerics or fall back to fp32", steps },
    knobs,
  });
}

function oomRecovered(ctx: Ctx): CheckResult {
  const events = ctx.tl.events.filter((e) => e.event === "oom_recovered");
  if (events.length === 0) return { check: "oom_recovered", why: "no out-of-memory recoveries" };
  const last = events[events.length - 1] as EventEntry;
  const mbNow = typeof last.details.micro_batch === "number" ? last.details.micro_batch : null;
  const batch = typeof last.details.batch === "number" ? last.details.batch : null;
  const split = typeof last.details.split === "number" ? last.details.split : null;
  const acc = typeof last.details.accumulation === "number" ? last.details.accumulation : null;
  const evidence = [
    ev("out-of-memory recoveries", events.length, "count", `${events.length} step${events.length === 1 ? " ran out of memory and was" : "s ran out of memory and were"} retried in smaller chunks (first at step ${events[0]?.step ?? "?"})`),
  ];
  if (batch !== null && mbNow !== null) evidence.push(ev("micro-batch after recovery", mbNow, "count", `batch ${batch} now runs as ${split ?? "?"} chunks of ≤ ${mbNow} (accumulation ${acc ?? "?"})`));
  const knobs: KnobTrial[] = mbNow !== null && batch !== null ? [{ name: "batch_size", values: [...new Set([mbNow, Math.round((mbNow + batch) / 2), batch])].sort((a, b) => a - b) }] : [];
  return finding(ctx, {
    id: "oom_recovered",
    title: "Micro-batch too large for memory",
    severity: "medium",
    confidence: { level: "high", reason: "the SDK reported each recovery" },
    summary: `The configured micro-batch does not fit: ${events.length} step${events.length === 1 ? " ran out of memory and was" : "s ran out of memory and were"} split. Each recovery costs a failed attempt.`,
    evidence,
    fix: {
      summary: "configure the micro-batch that fits",
      steps: [
        mbNow !== null && batch !== null
          ? `Set the micro-batch to ${mbNow} and multiply accumulation by ${split ?? batch / mbNow}: the same effective batch with no failed attempts.`
          : "Lower the micro-batch and raise accumulation by the same factor.",
        "Or lower memory per sample: bf16-mixed / fp16-mixed, activation checkpointing.",
      ],
    },
    knobs,
  });
}

function pcieTraffic(ctx: Ctx): CheckResult {
  if (!ctx.gpu) return { check: "pcie_traffic", reason: "CPU run: there is no host-to-device link" };
  const rx = ctx.samples.flatMap((s) => jobGpus(ctx, s).map((g) => g.pcie_rx_bytes_per_s)).filter((v): v is number => v !== null);
  if (rx.length === 0) return { check: "pcie_traffic", reason: "the sampler did not record PCIe throughput (pcie_rx_bytes_per_s) for this run" };
  const avg = mean(rx) as number;
  const share = avg / T.PCIE_ASSUMED_LINK_BYTES_PER_S;
  if (share < T.PCIE_H2D_LINK_SHARE) return { check: "pcie_traffic", why: `host-to-device traffic ${formatRate(avg / 1e9)} GB/s, ${formatShare(share)} of a PCIe 3.0 x16 link` };
  const perSample = ctx.m.samples_per_s !== null && ctx.m.samples_per_s > 0 ? avg / ctx.m.samples_per_s : null;
  const evidence = [
    ev("host-to-device traffic", avg, "bytes/s", `${formatRate(avg / 1e9)} GB/s host-to-device on average (peak ${formatRate((maxOf(rx) ?? 0) / 1e9)} GB/s), ${formatShare(share)} of a PCIe 3.0 x16 link (${formatRate(T.PCIE_ASSUMED_LINK_BYTES_PER_S / 1e9)} GB/s assumed)`),
  ];
  if (perSample !== null) evidence.push(ev("bytes per sample", perSample, "bytes", `${formatBytes(perSample)} cross the bus per training sample`));
  const pinned = knobSeen(ctx, "pin_memory");
  return finding(ctx, {
    id: "pcie_traffic",
    title: "Heavy host-to-device traffic",
    severity: (ctx.m.gpu_util_mean ?? 100) < T.UTIL_BUSY ? "medium" : "low",
    confidence: { level: rx.length >= T.SAMPLES_FOR_CONFIDENCE ? "medium" : "low", reason: `PCIe counters over ${rx.length} readings; the link's real width and generation were not recorded` },
    summary: `The job moves ${formatRate(avg / 1e9)} GB/s from host to GPU; copies on the default stream stall the GPU while they run.`,
    evidence,
    fix: {
      summary: "copy less, and copy asynchronously",
      steps: [
        "Pin host memory (DataLoader(pin_memory=True)) and copy with .to(device, non_blocking=True), so copies overlap compute.",
        "Send compact data and convert on the GPU: uint8 images or int16 sensor values instead of float32, decoding/augmentation on the device.",
        "Keep a dataset that fits in GPU memory on the GPU once, and index it there.",
        "Avoid moving model outputs or state to the host every step (.cpu(), .numpy(), .item()).",
      ],
    },
    knobs: pinned || ctx.gpu ? [{ name: "pin_memory", values: [false, true] }] : [],
  });
}

function clocksHeldBack(ctx: Ctx): CheckResult {
  if (!ctx.gpu) return { check: "clocks_held_back", reason: "CPU run: no GPU clocks" };
  const readings = ctx.samples.flatMap((s) => jobGpus(ctx, s)).filter((g) => g.throttle !== null);
  if (readings.length === 0) return { check: "clocks_held_back", reason: "the sampler did not record clock-event reasons (NVML CurrentClocksEventReasons)" };
  const held = readings.filter((g) => (g.throttle ?? []).some((r) => T.THROTTLE_REASONS.includes(r.toLowerCase())));
  const share = held.length / readings.length;
  if (share < T.THROTTLE_SHARE) return { check: "clocks_held_back", why: `power or temperature held the clocks back in ${formatShare(share)} of readings` };
  const byReason = new Map<string, number>();
  for (const g of held) for (const r of g.throttle ?? []) if (T.THROTTLE_REASONS.includes(r.toLowerCase())) byReason.set(r, (byReason.get(r) ?? 0) + 1);
  const clockHeld = mean(held.map((g) => g.sm_clock_mhz).filter((v): v is number => v !== null));
  const free = readings.filter((g) => !held.includes(g));
  const clockFree = mean(free.map((g) => g.sm_clock_mhz).filter((v): v is number => v !== null));
  const evidence: Evidence[] = [ev("time held back", share, "share", `power or temperature limited the clocks in ${formatShare(share)} of ${readings.length} readings during steady state`)];
  for (const [reason, n] of [...byReason.entries()].sort((a, b) => b[1] - a[1])) evidence.push(ev(`reason ${reason}`, n / readings.length, "share", `${reason}: ${formatShare(n / readings.length)} of readings`));
  let cost: number | null = null;
  if (clockHeld !== null && clockFree !== null && clockFree > 0) {
    const drop = Math.max(0, 1 - clockHeld / clockFree);
    cost = share * drop;
    evidence.push(ev("SM clock", clockHeld, "MHz", `SM clock ${clockHeld.toFixed(0)} MHz while held back against ${clockFree.toFixed(0)} MHz otherwise (${formatShare(drop)} lower)`));
    evidence.push(ev("estimated cost", cost, "share", `about ${formatShare(cost)} of compute speed lost over the run (time held back × clock drop; memory-bound work loses less)`));
  }
  const thermal = [...byReason.keys()].some((r) => r.includes("thermal"));
  const power = [...byReason.keys()].some((r) => r.includes("power") || r === "hw_slowdown");
  const steps: string[] = [];
  if (power) steps.push("Power: check the limit in force (nvidia-smi -q -d POWER); if it was lowered, restore the default (nvidia-smi -pl <default W>, needs root). On a laptop, run on mains power in the performance profile.");
  if (thermal) steps.push("Temperature: improve airflow or the fan curve, clean dust filters, leave a slot free beside the card.");
  steps.push("Nothing in the job's config changes this: it is the card's environment. Compare runs with brim report --vs after a change.");
  return finding(ctx, {
    id: "clocks_held_back",
    title: "Clocks held back by power or temperature",
    severity: cost !== null && cost >= 0.05 ? "medium" : "low",
    confidence: { level: readings.length >= T.SAMPLES_FOR_CONFIDENCE ? "high" : "low", reason: `clock-event reasons read by NVML in ${readings.length} readings` },
    summary: `Power or temperature held the GPU's clocks back ${formatShare(share)} of the time${cost !== null ? `, costing about ${formatShare(cost)} of its speed` : ""}.`,
    evidence,
    fix: { summary: thermal && !power ? "cool the card" : "give the card its full power budget", steps },
    knobs: [],
  });
}

function gpuContexts(ctx: Ctx): CheckResult {
  const { m, tl } = ctx;
  if (!ctx.gpu) return { check: "gpu_contexts", reason: "CPU run: no GPU contexts" };
  const treeBytes = tl.samples.map((s) => s.tree.gpu_bytes).filter((v): v is number => v !== null);
  if (treeBytes.length === 0) return { check: "gpu_contexts", reason: "GPU memory per process was not recorded (nvidia-smi fallback, or process ids hidden by a container)" };
  const treeCount = maxOf(tl.samples.map((s) => s.tree.gpu_pids)) ?? 0;
  const deviceCount = maxOf(tl.samples.flatMap((s) => jobGpus(ctx, s).map((g) => g.processes))) ?? 0;
  // The driver's list per GPU may include other users' processes: the tree's own count wins.
  const processes = treeCount > 0 ? treeCount : deviceCount;
  const countedBy = treeCount > 0 ? "NVML counted the job's processes holding memory" : "NVML's process list of the GPU (may include processes outside the job)";
  const peak = maxOf(treeBytes) ?? 0;
  const framework = m.framework_peak_reserved_bytes;
  const extra = framework === null ? null : peak - framework;
  const total = m.gpu?.total_bytes ?? null;
  const jaxVersion = tl.hellos.find((h) => h.framework === "jax" || "jax" in h.versions) ?? null;
  const jax = jaxVersion !== null || "jax" in ctx.meta.versions || tl.events.some((e) => e.event === "framework_loaded" && e.details.name === "jax");
  const startT = tl.start?.t ?? tl.samples[0]?.t ?? 0;
  const early = tl.samples.filter((s) => s.t - startT <= 30).map((s) => s.tree.gpu_bytes).filter((v): v is number => v !== null);
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
  const evidence: Evidence[] = [ev("process tree GPU memory", peak, "bytes", `the job's processes held ${formatBytes(peak)} of GPU memory together at the peak`)];
  if (processes > 0) evidence.push(ev("processes with a GPU context", processes, "count", `${processes} processes of the job held GPU memory at once (each CUDA context costs ~300–600 MiB before any tensor)`));
  if (extra !== null && framework !== null) evidence.push(ev("outside the main allocator", extra, "bytes", `${formatBytes(extra)} beyond the ${formatBytes(framework)} PyTorch's allocator reserved in the main process`));
  if (preallocated && earlyMax !== null && total !== null) evidence.push(ev("held right after start", earlyMax, "bytes", `${formatBytes(earlyMax)} (${formatShare(earlyMax / total)} of the card) held within 30 s of start: a framework preallocating`));
  if (jax) evidence.push(ev("JAX", true, "text", "JAX is loaded in the job (it preallocates 75 % of the card by default)"));
  const steps: string[] = [];
  if (jax || preallocated) {
    steps.push("Stop JAX preallocating: XLA_PYTHON_CLIENT_PREALLOCATE=false, or give it a share: XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 (set before JAX starts; brim.apply_jax_cap() does it from the cap). TensorFlow: TF_FORCE_GPU_ALLOW_GROWTH=true.");
  }
  if (processes >= 2) {
    steps.push("Run environments or helper processes without the GPU: CUDA_VISIBLE_DEVICES= in their environment, and do not touch torch.cuda in them.");
    steps.push("Consolidate: step all environments in one process as a batch (a vectorised env on tensors) so one CUDA context serves them all.");
  }
  if (!jax && !preallocated && processes < 2) steps.push("Find what holds the memory: nvidia-smi --query-compute-apps=pid,used_memory --format=csv while the job runs.");
  return finding(ctx, {
    id: "gpu_contexts",
    title: preallocated || jax ? "A framework preallocates GPU memory" : "Many processes each hold a GPU context",
    severity: extra !== null && total !== null && extra >= 0.25 * total ? "high" : "medium",
    confidence: {
      level: (processes >= 2 && treeCount > 0) || preallocated ? "high" : processes >= 2 ? "medium" : "low",
      reason: processes >= 2 ? countedBy : preallocated ? "the memory held right after start matches preallocation" : "inferred from memory outside PyTorch's allocator; the processes were not counted",
    },
    summary: `${processes >= 2 ? `${processes} processes` : "The job"} hold${processes >= 2 ? "" : "s"} ${formatMaybeBytes(extra)} of GPU memory outside the training process's allocator${preallocated ? ", most of it taken at start by a preallocating framework" : ""}: memory the model cannot use.`,
    evidence,
    fix: { summary: jax || preallocated ? "disable preallocation" : "one GPU context per GPU", steps },
    knobs: [],
  });
}

function utilizationGap(ctx: Ctx): CheckResult {
  const { m, steady } = ctx;
  if (!ctx.gpu) return { check: "utilization_gap", reason: "CPU run: GPU utilization does not apply" };
  if (m.gpu_util_mean === null) return { check: "utilization_gap", reason: "the sampler recorded no GPU utilization" };
  const u = m.gpu_util_mean;
  const sm = m.sm_activity_mean;
  if (u >= 95 && (sm === null || sm > T.SM_ACTIVITY_LOW)) return { check: "utilization_gap", why: `utilization ${formatPercent(u)}` };
  const evidence: Evidence[] = [ev("GPU utilization", u, "percent", `NVML: a kernel ran ${formatPercent(u)} of the time (over steady state)`)];
  let text: string;
  let hostBound = false;
  let level: Certainty = ctx.samples.length >= T.SAMPLES_FOR_CONFIDENCE ? "medium" : "low";
  const wall = m.steady_window === null ? 0 : m.steady_window[1] - m.steady_window[0];
  if (steady.length > 0 && wall > 0) {
    const wait = steady.reduce((a, s) => a + s.wait_s, 0);
    const compute = steady.reduce((a, s) => a + s.compute_s, 0);
    const outside = Math.max(0, wall - wait - compute);
    const idle = 100 - u;
    const waitPts = Math.min(idle, (100 * wait) / wall);
    const outsidePts = Math.min(idle - waitPts, (100 * outside) / wall);
    const insidePts = Math.max(0, idle - waitPts - outsidePts);
    hostBound = u < T.UTIL_LOW && insidePts >= idle / 2;
    evidence.push(ev("waiting for data", waitPts, "percent", `${waitPts.toFixed(0)} points: the loop waited for the next batch ${formatShare(wait / wall)} of the time`));
    if (outsidePts >= 1) evidence.push(ev("between steps", outsidePts, "percent", `${outsidePts.toFixed(0)} points: time between steps outside the loop (evaluation, checkpoints, logging), ${formatShare(outside / wall)} of the time`));
    evidence.push(ev("inside steps", insidePts, "percent", `${insidePts.toFixed(0)} points: gaps between kernels inside the steps (Python, kernel launches, host syncs, CPU work)`));
    const segments = [`about ${waitPts.toFixed(0)} to waiting for the next batch`];
    if (outsidePts >= 1) segments.push(`${outsidePts.toFixed(0)} to time between steps, outside the training loop`);
    segments.push(`${insidePts.toFixed(0)} to gaps inside the steps (Python between kernels, launches, host syncs)`);
    const joined = segments.length === 2 ? segments.join(" and ") : `${segments.slice(0, -1).join(", ")} and ${segments[segments.length - 1] ?? ""}`;
    text = `The GPU ran kernels ${formatPercent(u)} of the time. Of the ${idle.toFixed(0)} points it sat idle, ${joined}.`;
    if ((100 * compute) / wall < u - 5) text += " GPU work overlapped the waits, so these shares are approximate.";
    level = lower(level, stepsConfidence(steady.length).level);
  } else {
    text = `The GPU ran kernels ${formatPercent(u)} of the time; without step reports brim cannot say where the idle time went.`;
    level = "low";
  }
  if (sm !== null) {
    evidence.push(ev("SM activity", sm, "percent", `GPM: while kernels ran, ${formatPercent(sm)} of the SMs were busy on average`));
    text += ` And "utilization" only says a kernel was running: SM activity was ${formatPercent(sm)}, so ${sm <= T.SM_ACTIVITY_LOW ? "most of the card sat idle even then" : "the kernels used the card reasonably"}.`;
  } else {
    text += " (Utilization only says a kernel was running, not how much of the card it used; SM activity was not recorded.)";
  }
  const mb = m.micro_batch;
  const values = mb === null ? [] : powersUpTo(mb, suggestedMicroBatch(m) ?? mb * 4, 3);
  return finding(ctx, {
    id: "utilization_gap",
    title: "Why utilization is not 100 %",
    severity: hostBound ? "medium" : "info",
    confidence: { level, reason: `NVML utilization is averaged over 1/6–1 s windows; ${ctx.samples.length} readings aligned with ${steady.length} steps` },
    summary: text,
    evidence,
    fix: hostBound
      ? {
          summary: "the GPU waits for the host inside the steps: less Python per kernel",
          steps: [
            "Remove per-step host syncs: loss.item(), printing or logging tensors every step, .cpu() of outputs.",
            'Capture the step: torch.compile(model) fuses small kernels; mode="reduce-overhead" adds CUDA graphs.',
            mb === null ? "Raise the micro-batch so each kernel has more work." : `Raise the micro-batch (${values.join(" → ")}) so each kernel has more work.`,
          ],
        }
      : { summary: "follow the findings above for the largest share", steps: [] },
    knobs: hostBound && values.length > 1 ? [{ name: "batch_size", values }] : [],
  });
}

function cpuRun(ctx: Ctx): CheckResult | null {
  if (ctx.gpu) return null;
  const { m } = ctx;
  const evidence: Evidence[] = [];
  if (m.data_wait_share !== null) evidence.push(ev("data wait share", m.data_wait_share, "share", `waiting for data: ${formatShare(m.data_wait_share)} of step time`));
  if (m.samples_per_s !== null) evidence.push(ev("throughput", m.samples_per_s, "samples/s", `${formatRate(m.samples_per_s)} samples/s over ${m.steady_steps} steady steps`));
  if (m.tree_cpu_percent_mean !== null) {
    const cores = m.host_cpus;
    evidence.push(
      ev("CPU of the job's processes", m.tree_cpu_percent_mean, "percent", `the process tree used ${formatPercent(m.tree_cpu_percent_mean)} CPU (${(m.tree_cpu_percent_mean / 100).toFixed(1)} of ${cores ?? "?"} cores)`),
    );
  }
  const rss = m.peak_tree_rss_bytes;
  const cap = ctx.meta.cap_scope === "ram" ? ctx.meta.cap_bytes : null;
  if (rss !== null) {
    const against = cap ?? ctx.meta.device.host.mem_total_bytes;
    evidence.push(ev("peak RSS", rss, "bytes", `peak RSS of the process tree ${formatBytes(rss)} of ${cap !== null ? "the cap" : "the host's memory"} ${formatBytes(against)} (${formatShare(rss / against)})`));
  }
  const notes = ["launch-bound steps", "GPU memory left unused", "fp32 on tensor cores", "host-to-device traffic", "clocks held back", "GPU contexts", "why utilization is not 100 %"];
  return finding(ctx, {
    id: "cpu_run",
    title: "CPU run: what can be said without a GPU",
    severity: "info",
    confidence: { level: "high", reason: "the run used no GPU (device backend cpu)" },
    summary: `This run trained on the CPU. Data wait, CPU use and RAM are measured; the GPU checks (${notes.join(", ")}) could not be evaluated and need a run on a GPU.`,
    evidence,
    fix: { summary: "run on a GPU to evaluate the GPU checks", steps: ["brim run -- <the same command> on a machine with a GPU, then brim doctor again."] },
    knobs: [],
  });
}

const CHECK_FUNCTIONS: readonly ((ctx: Ctx) => CheckResult | null)[] = [
  dataStarved,
  launchBound,
  memoryUnused,
  fp32OnTensorCores,
  nonfiniteLoss,
  oomRecovered,
  pcieTraffic,
  clocksHeldBack,
  gpuContexts,
  utilizationGap,
  cpuRun,
];

/**
 * Diagnoses a run: every check of {@link CHECKS} either finds something (with evidence, a fix and a
 * confidence), passes (with why), or could not be evaluated (with why). Findings come most severe first.
 *
 * @example
 * ```ts
 * const { meta, timeline } = await store.readRun(id);
 * const report = diagnose(meta, timeline);
 * for (const f of report.findings) console.log(f.title, f.verify);
 * ```
 */
export function diagnose(meta: RunMeta, entries: readonly TimelineEntry[]): DoctorReport {
  const tl = readTimeline(entries);
  const m = measureRun(meta, tl);
  const steady = tl.steps.filter((s) => s.pid === tl.mainPid && !s.warmup);
  const gpu = meta.device.backend !== "cpu" && meta.device.gpus.length > 0;
  const ctx: Ctx = { meta, tl, m, steady, samples: steadySamples(tl, m.steady_window), gpu };
  const findings: Finding[] = [];
  const passed: Passed[] = [];
  const notEvaluated: NotEvaluated[] = [];
  for (const check of CHECK_FUNCTIONS) {
    const result = check(ctx);
    if (result === null) continue;
    if ("title" in result) findings.push(result);
    else if ("reason" in result) notEvaluated.push(result);
    else passed.push(result);
  }
  findings.sort((a, b) => SEVERITY_ORDER[a.severity] - SEVERITY_ORDER[b.severity] || CERTAINTY_ORDER[a.confidence.level] - CERTAINTY_ORDER[b.confidence.level]);
  const notes: string[] = [];
  if (tl.steps.length === 0) notes.push("The job reported no steps: wrap its batch loop in brim.track(loader) (Python SDK) so brim can time data wait and compute.");
  else if (steady.length === 0) notes.push("Every step was flagged warm-up: nothing is steady state yet; the numbers below use no steps.");
  if (meta.end === null) notes.push("The run has not ended (or brim stopped before writing its end): findings cover the timeline so far.");
  const gpuName = meta.device.gpus.find((g) => m.gpu_indexes.includes(g.index))?.name ?? meta.device.gpus[0]?.name;
  return {
    schema: "brim.doctor/v1",
    run: {
      id: meta.id,
      kind: meta.kind,
      command: meta.command,
      device: gpu && gpuName !== undefined ? gpuName : `CPU (${meta.device.host.cpus} cores)`,
      backend: meta.device.backend,
      started_at: meta.started_at,
      ended_at: meta.ended_at,
      end: meta.end?.cause ?? null,
      running: meta.end === null,
    },
    measures: m,
    findings,
    passed,
    not_evaluated: notEvaluated,
    notes,
  };
}
