/**
 * The `data_starved` check of `brim doctor` (docs/doctor.md).
 *
 * @module
 */
import { formatPercent, formatSeconds, formatShare } from "../../format.ts";
import { mean } from "../../stats.ts";
import * as T from "../thresholds.ts";
import type { KnobTrial } from "../tune-hint.ts";
import { stepSeconds } from "../../record/timeline/index.ts";
import { ev, finding, jobGpus, knobSeen, lower, phaseAt, stepsConfidence, workerValues, type CheckResult, type Ctx } from "./context.ts";
import type { Evidence } from "./types.ts";
import { noDataWaitReason } from "./no-steps.ts";

export function dataStarved(ctx: Ctx): CheckResult {
  const { m, steady } = ctx;
  if (steady.length === 0 || m.data_wait_share === null) {
    return {
      check: "data_starved",
      reason: noDataWaitReason(ctx),
    };
  }
  if (m.data_wait_share < T.DATA_WAIT_SHARE) {
    return { check: "data_starved", why: `data wait is ${formatShare(m.data_wait_share)} of step time (below ${formatShare(T.DATA_WAIT_SHARE)})` };
  }
  const timed = steady.filter((s) => (stepSeconds(s) ?? 0) > 0);
  const waitingSteps = timed.filter((s) => (s.wait_s ?? 0) / (stepSeconds(s) ?? 1) >= T.DATA_WAIT_SHARE).length;
  const evidence: Evidence[] = [
    ev(
      "data wait share",
      m.data_wait_share,
      "share",
      `${formatShare(m.data_wait_share)} of step time is spent waiting for the next batch (Σ wait / Σ step time over ${m.steady_steps} steady steps)`,
    ),
    ev(
      "median wait per step",
      m.wait_time_s,
      "s",
      `median wait ${formatSeconds(m.wait_time_s)} against median compute ${formatSeconds(m.compute_time_s)} per step`,
    ),
    ev("steps that waited", waitingSteps, "count", `${waitingSteps} of ${timed.length} steps waited ${formatShare(T.DATA_WAIT_SHARE)} of their time or more`),
  ];
  const loader = loaderOf(ctx);
  const { workers, hostSaturated } = loader;
  evidence.push(...cpuEvidence(ctx, loader), ...phaseEvidence(ctx));
  const suggested = workerValues(workers, m.host_cpus);
  const steps = fixSteps(ctx, loader, suggested);
  const knobs: KnobTrial[] = [];
  if (!hostSaturated && suggested.length > 1) knobs.push({ name: "num_workers", values: suggested });
  if (knobSeen(ctx, "gpu_augment")) knobs.push({ name: "gpu_augment", values: [false, true] });
  if (ctx.gpu) knobs.push({ name: "pin_memory", values: [false, true] });
  const c = stepsConfidence(m.steady_steps);
  const consistent = timed.length > 0 ? waitingSteps / timed.length : 0;
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

/** How the job loads its data: its loader workers and how busy they and the host are. */
interface Loader {
  workers: number | null;
  perProcess: number | null;
  loaderSaturated: boolean;
  jobHostShare: number | null;
  hostSaturated: boolean;
  othersBusy: boolean;
}

function loaderOf(ctx: Ctx): Loader {
  const { m } = ctx;
  const workers = m.num_workers;
  const processes = (workers ?? 0) + 1;
  const perProcess = m.tree_cpu_percent_mean === null ? null : m.tree_cpu_percent_mean / processes;
  const loaderSaturated = perProcess !== null && perProcess >= T.LOADER_CPU_SATURATED_PERCENT;
  // Only the job's own use of the host rules workers out: a host kept busy by other work still
  // gives extra workers a share of its cores, and workers overlap loading with compute.
  const jobHostShare = m.tree_cpu_percent_mean === null || m.host_cpus === null ? null : (m.tree_cpu_percent_mean / (100 * m.host_cpus)) * 100;
  const hostSaturated = jobHostShare !== null && jobHostShare >= T.HOST_CPU_SATURATED_PERCENT;
  const othersBusy = !hostSaturated && m.host_cpu_percent_mean !== null && m.host_cpu_percent_mean >= T.HOST_CPU_SATURATED_PERCENT;
  return { workers, perProcess, loaderSaturated, jobHostShare, hostSaturated, othersBusy };
}

function cpuEvidence(ctx: Ctx, loader: Loader): Evidence[] {
  const { m } = ctx;
  const { workers, perProcess, loaderSaturated, hostSaturated, othersBusy } = loader;
  const out: Evidence[] = [];
  if (m.tree_cpu_percent_mean !== null) {
    out.push(
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
    const whose = hostSaturated
      ? ", nearly all by the job itself: no core to spare"
      : othersBusy
        ? ", mostly by other work: workers will share the cores with it"
        : "";
    out.push(
      ev(
        "host CPU",
        m.host_cpu_percent_mean,
        "percent",
        `the host's CPUs were ${formatPercent(m.host_cpu_percent_mean)} busy over ${m.host_cpus ?? "?"} cores${whose}`,
      ),
    );
  }
  return out;
}

/** GPU utilization in the readings taken while the job waited against those while it computed. */
function phaseEvidence(ctx: Ctx): Evidence[] {
  const { m, steady } = ctx;
  const out: Evidence[] = [];
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
      out.push(
        ev(
          "GPU utilization while waiting",
          uw,
          "percent",
          `GPU utilization ${formatPercent(uw)} in readings taken while the job waited for data, ${formatPercent(uc)} while it computed${caveat}`,
        ),
      );
    }
  }
  return out;
}

function fixSteps(ctx: Ctx, loader: Loader, suggested: number[]): string[] {
  const { m } = ctx;
  const { workers, perProcess, loaderSaturated, jobHostShare, hostSaturated } = loader;
  const steps: string[] = [];
  const next = suggested.find((w) => w > (workers ?? 0));
  if (hostSaturated) {
    steps.push(
      `The job already keeps ${formatPercent(jobHostShare)} of the host's ${m.host_cpus ?? "?"} cores busy: more loader workers cannot help. Make each batch cheaper instead (below).`,
    );
  } else if (workers === null || workers === 0) {
    steps.push(
      `Load batches in worker processes: DataLoader(num_workers=${next ?? 2}, persistent_workers=True, prefetch_factor=4) (config key data_loader.num_workers, knob num_workers).`,
    );
  } else if (loaderSaturated && next !== undefined) {
    steps.push(`The ${workers} workers are saturated: raise num_workers to ${next} (the host has ${m.host_cpus ?? "?"} cores).`);
  } else if (perProcess !== null && !loaderSaturated) {
    steps.push(
      `The ${workers} workers are not CPU-bound (${formatPercent(perProcess)} each): they wait on reading files. Raise num_workers${next !== undefined ? ` to ${next}` : ""} to have more reads in flight, with prefetch_factor=4 and persistent_workers=True.`,
    );
  } else {
    steps.push(
      `Keep the ${workers} workers ahead of the ${ctx.gpu ? "GPU" : "training step"}: prefetch_factor=4 and persistent_workers=True (workers stay alive between epochs).`,
    );
  }
  if (ctx.gpu) steps.push("Pin host memory (pin_memory=True) and copy with .to(device, non_blocking=True) so the copy overlaps compute.");
  steps.push(
    knobSeen(ctx, "gpu_augment")
      ? "Move augmentation to the GPU, batched (this job has the knob gpu_augment: set it to true)."
      : "Move per-sample augmentation out of the Dataset and run it batched on the training device.",
  );
  steps.push("Cache decoded or preprocessed data (e.g. one array file read with np.load(mmap_mode='r')) instead of decoding every sample every epoch.");
  return steps;
}
