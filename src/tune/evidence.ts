/**
 * What a trial's measurements say about where the next trial should go: a loop that waits for data
 * gains from loader workers (and pin_memory, prefetch, persistent workers), a job that runs fp32 on
 * a GPU with tensor cores gains from bf16/fp16, and a knob the evidence says cannot pay is not worth
 * a trial. Pure: a trial's result in, knobs ranked by expected gain out, each with the evidence
 * that put it there (it becomes the trial's purpose line).
 *
 * @example
 * ```ts
 * const ranked = rankByEvidence(space.others, evidenceOf(result, knobs, capBytes), knobs);
 * ranked[0]; // { knob: "num_workers", values: [0, 1, 2, 4], gain: 0.43, why: "the loop waits for data 43 % of step time" }
 * ```
 * @module
 */
import { ENVS_KNOB, knobSpec } from "../knobs/index.ts";
import type { Knobs, KnobValue, TrialResult } from "./types.ts";
import { median } from "../stats.ts";
import { measurableValues, ROLLOUT_MIN, ROLLOUT_STEP, rolloutShare, type RolloutEvidence } from "./rollout.ts";

export { ROLLOUT_MIN, ROLLOUT_STEP, rolloutShare } from "./rollout.ts";

/** The measurements of one trial the search reads. */
export interface TrialEvidence {
  /** share of step time spent waiting for the next batch */
  dataWait: number | null;
  /** NVML utilization, percent */
  gpuUtil: number | null;
  /** SM activity, percent */
  smActivity: number | null;
  /** the precision in force (reported by the job, else the knob) */
  precision: string | null;
  /** share of the cap the trial's peak used */
  memoryUsed: number | null;
  /** median step time, seconds */
  stepS: number | null;
  /** mean CPU of the job's processes in cores, and the machine's cores */
  cpuCores?: number | null;
  cpus?: number | null;
  /** mean share of the whole machine's CPU in use (every process), 0..1 */
  hostBusy?: number | null;
  /** the trial's DataLoader workers (the num_workers knob), when known */
  workers?: number | null;
  /** the rollouts among the steps measured (tune/rollout.ts {@link rolloutShare}) */
  rollout?: RolloutEvidence | null;
}

/** A data-wait share at least this large, with the CPUs idle while waiting, makes the loader I/O-bound. */
export const IO_BOUND_WAIT = 0.5;

/**
 * What bounds a loader the loop waits for: "io" when the job's processes leave the CPUs idle while it
 * waits (files, network, sleeps: more workers than cores help), "cpu" when they are busy (workers
 * help up to the cores), null without a wait worth a loader knob or without a CPU reading. A starved
 * CPU-bound loader keeps its fetchers busy: each of `workers` processes (the main one with none) is
 * on a core for the whole wait share w, and the main process computes for the rest, so the job's
 * processes average at least w × max(1, min(workers, cores)) + (1 − w) cores. Under half that (a
 * quarter on a host busy with other work, which starves every process), the fetch cannot be CPU work.
 *
 * @example
 * ```ts
 * loaderBound({ dataWait: 0.98, cpuCores: 0.05, cpus: 2 }); // "io"
 * loaderBound({ dataWait: 0.9, cpuCores: 1.0, cpus: 2 }); // "cpu"
 * loaderBound({ dataWait: 0.81, cpuCores: 0.55, cpus: 2, workers: 2 }); // "io": two busy workers would keep 1.8 cores busy
 * ```
 */
export function loaderBound(evidence: Pick<TrialEvidence, "dataWait" | "cpuCores" | "cpus" | "hostBusy" | "workers">): "io" | "cpu" | null {
  const { dataWait: wait, cpuCores: cores, cpus } = evidence;
  if (wait == null || wait < STARVED_MIN || cores == null || cpus == null || cpus <= 0) return null;
  const fetchers = Math.max(1, Math.min(evidence.workers ?? 0, cpus));
  const cpuBoundFloor = wait * fetchers + (1 - wait);
  const share = evidence.hostBusy != null && evidence.hostBusy >= HOST_SATURATED ? 0.25 : 0.5;
  if (cores >= share * cpuBoundFloor) return "cpu";
  // idle while waiting a little: not worth calling either way
  return wait >= IO_BOUND_WAIT ? "io" : null;
}

/**
 * The most one loader worker can gain over loading in the main process, at data-wait share `wait`: it
 * only overlaps a step's loading (wait) with its compute (1 − wait), so a step takes the longer of the
 * two instead of their sum.
 *
 * @example
 * ```ts
 * oneWorkerGain(0.97); // 0.031: 3 % of compute to hide
 * oneWorkerGain(0.5); // 1: loading and compute overlap fully
 * ```
 */
export function oneWorkerGain(wait: number): number {
  const longer = Math.max(wait, 1 - wait);
  return longer <= 0 ? 0 : Math.min(wait, 1 - wait) / longer;
}

/** Below this bound on one worker's gain, the num_workers walk from 0 skips 1: a gain that small stays within a trial's noise, and a verdict of "clearly slower" there would end the walk before the values that help. */
export const ONE_WORKER_MIN = 0.1;

/**
 * The same for the noise this tune has measured: one trial each cannot tell a gain under this many
 * times one trial's relative noise from the noise itself (seen on 2 busy cores: one worker read at a
 * third of no workers on a job waiting 79 % of its steps, ±13 % noise, and the walk ended there).
 */
export const ONE_WORKER_NOISES = 3;

/** A host busier than this share (all cores, every process) starves every process: the I/O-bound bar is lower. */
export const HOST_SATURATED = 0.85;

/** Cores other processes keep busy from which the job's threads are contended: fewer threads are worth a trial. */
export const CONTENDED_CORES = 0.5;
/**
 * The gain contended threads promise when the loop waits for data: ranked above every loader knob,
 * because a trial of more loader workers beside threads that wait for a core reads slower (more
 * processes to wait for) and would end the workers' walk before the value that helps.
 */
export const CONTENTION_GAIN = 1.5;
/**
 * The same for a loop on a GPU that hardly waits for data: no loader walk to spoil, and its threads
 * only feed the GPU, so it is tried after the micro-batch phase. A run on the CPU gets
 * {@link CONTENTION_GAIN} however fed its loop: its threads are the training's compute, so every step
 * waits for the contended core (seen by hand on the corpus's sentence-transformers fine-tune beside
 * busy cores, not yet a committed record: docs/corpus.md).
 */
export const CONTENTION_LATE = 0.06;

/**
 * The cores the machine's other processes keep busy during a trial (the whole machine's use less the
 * job's), null without both readings.
 *
 * @example
 * ```ts
 * otherWork({ hostBusy: 0.75, cpus: 2, cpuCores: 0.5 }); // 1
 * ```
 */
export function otherWork(evidence: Pick<TrialEvidence, "hostBusy" | "cpus" | "cpuCores">): number | null {
  const { hostBusy, cpus, cpuCores } = evidence;
  if (hostBusy == null || cpus == null || cpuCores == null) return null;
  return Math.max(0, hostBusy * cpus - cpuCores);
}

/** A data wait at least this share of which is in the steps that collected a rollout is the rollout's, in a job with environments. */
export const ROLLOUT_OF_WAIT = 0.8;
/** What a loader knob's gain is multiplied by when the wait is the rollout's. */
export const ROLLOUT_OF_WAIT_GAIN = 0.25;

/** A knob with the gain its evidence promises and the evidence, in words. */
export interface RankedKnob {
  knob: string;
  values: KnobValue[];
  /** expected relative throughput gain, a rough share (0.4 = +40 %) */
  gain: number;
  why: string;
}

/** A knob whose expected gain is at least this is tried before the micro-batch phase. */
export const EVIDENCE_FIRST = 0.15;
/** Below this data-wait share, loader knobs are not worth a trial. */
export const STARVED_MIN = 0.05;

const LOW_PRECISION = /bf16|fp16|16-mixed|half/i;

const pct = (share: number): string => `${(share * 100).toFixed(0)} %`;

/**
 * The evidence of a trial.
 *
 * @example
 * ```ts
 * evidenceOf(result, { precision: "fp32" }, 8 * 2 ** 30).dataWait; // 0.43
 * ```
 */
export function evidenceOf(result: TrialResult, knobs: Knobs, capBytes: number): TrialEvidence {
  const precision = result.precision ?? (typeof knobs.precision === "string" ? knobs.precision : null);
  return {
    dataWait: result.dataWaitShare ?? null,
    gpuUtil: result.gpuUtilMean ?? null,
    smActivity: result.smActivityMean ?? null,
    precision,
    memoryUsed: result.peakBytes !== null && capBytes > 0 ? result.peakBytes / capBytes : null,
    stepS: median(result.stepSeconds),
    cpuCores: result.cpuCores ?? null,
    cpus: result.cpus ?? null,
    hostBusy: result.hostBusy ?? null,
    workers: typeof knobs.num_workers === "number" ? knobs.num_workers : null,
    rollout: rolloutShare(result.stepSeconds),
  };
}

/**
 * How a `rollout` knob ranks on a trial's evidence: its gain with the why, or why it is skipped (a
 * rollout measured that took under {@link ROLLOUT_MIN} of the time). With no rollout in the steps
 * measured (fewer steps than one rollout's updates), it is tried after the knobs the evidence favours.
 */
function rankRollout(
  knob: string,
  values: KnobValue[],
  evidence: TrialEvidence,
  knobs: Knobs,
  gain: (share: number) => number,
  tie: number,
): { ranked: RankedKnob } | { skipped: string } {
  const alters = knobSpec(knob)?.alters;
  const rollout = evidence.rollout;
  const measurable = measurableValues(knob, values, rollout, knobs);
  const also = `${alters === undefined ? "" : `; ${alters}`}${measurable.why === null ? "" : `; ${measurable.why}`}`;
  values = measurable.values;
  if (rollout == null || rollout.steps === 0)
    return {
      ranked: {
        knob,
        values,
        gain: 0.04 + tie,
        why: `no step measured collected a rollout (no step ${ROLLOUT_STEP}× the median), no evidence either way${also}`,
      },
    };
  const seen = `${pct(rollout.share)} of the time measured is in the ${rollout.steps} step${rollout.steps === 1 ? "" : "s"} that collected a rollout (${ROLLOUT_STEP}× the median step or more)`;
  if (rollout.share < ROLLOUT_MIN) return { skipped: `${seen}: the environments' stepping hardly holds the updates up` };
  return { ranked: { knob, values, gain: gain(rollout.share) + tie, why: `${seen}${also}` } };
}

/**
 * Ranks the knobs beside the micro-batch by the gain the evidence promises, most first; knobs the
 * evidence rules out are returned in `skipped` with the reason. `noise`: one trial's relative noise
 * measured so far in this tune (values whose best gain stays within it are left out of a walk).
 *
 * @example
 * ```ts
 * rankByEvidence([{ knob: "num_workers", values: [0, 1] }], { dataWait: 0.02, ... }, { num_workers: 0 }).skipped;
 * // [{ knob: "num_workers", why: "the loop waits for data only 2 % of step time" }]
 * ```
 */
export function rankByEvidence(
  others: readonly { knob: string; values: KnobValue[] }[],
  evidence: TrialEvidence,
  knobs: Knobs,
  noise = 0,
): { ranked: RankedKnob[]; skipped: { knob: string; why: string }[] } {
  const ranked: RankedKnob[] = [];
  const skipped: { knob: string; why: string }[] = [];
  const wait = evidence.dataWait;
  const busy =
    evidence.gpuUtil !== null
      ? `, GPU busy ${evidence.gpuUtil.toFixed(0)} %${evidence.smActivity !== null ? `, SM activity ${evidence.smActivity.toFixed(0)} %` : ""}`
      : "";
  others.forEach(({ knob, values }, order) => {
    // ties keep the given order
    const tie = -order * 1e-6;
    const rule = knobSpec(knob)?.evidence;
    if (rule?.kind === "data-wait") {
      if (wait !== null && wait < STARVED_MIN && rule.whenFed !== "keep") {
        skipped.push({ knob, why: `the loop waits for data only ${pct(wait)} of step time` });
        return;
      }
      const workers = typeof knobs.num_workers === "number" ? knobs.num_workers : 0;
      // a job with environments whose wait is its rollout's (the ppo example's buffer is served by a
      // DataLoader after each rollout): loader workers do not step environments
      const rolloutWait = typeof knobs[ENVS_KNOB] === "number" && wait !== null && (evidence.rollout?.share ?? 0) >= ROLLOUT_OF_WAIT * wait;
      const gain = rule.gain(wait ?? 0.1, workers) * (rolloutWait ? ROLLOUT_OF_WAIT_GAIN : 1);
      const bound = loaderBound(evidence);
      const cpu =
        bound === "io"
          ? `, its processes busy ${(evidence.cpuCores ?? 0).toFixed(2)} of ${evidence.cpus ?? "?"} cores: I/O-bound, workers may go past the cores`
          : bound === "cpu"
            ? `, its processes busy ${(evidence.cpuCores ?? 0).toFixed(2)} of ${evidence.cpus ?? "?"} cores: CPU-bound, workers up to the cores`
            : "";
      const why =
        wait === null
          ? "loader setting (no data-wait measurement)"
          : `the loop waits for data ${pct(wait)} of step time${cpu}${busy}${rolloutWait ? `, most of it in the steps that collected a rollout: loader workers do not step the environments (${ENVS_KNOB} does)` : ""}`;
      const oneGain = wait === null ? null : oneWorkerGain(wait);
      const skipOne =
        knob === "num_workers" &&
        workers === 0 &&
        oneGain !== null &&
        oneGain < Math.max(ONE_WORKER_MIN, ONE_WORKER_NOISES * noise) &&
        values.some((v) => typeof v === "number" && v > 1);
      const withinNoise =
        oneGain !== null && oneGain >= ONE_WORKER_MIN
          ? ` (at most +${pct(oneGain)}, within ${ONE_WORKER_NOISES}× this job's noise of ±${pct(noise)} a trial)`
          : "";
      ranked.push({
        knob,
        values: skipOne ? values.filter((v) => v !== 1) : values,
        gain: gain + tie,
        why: skipOne
          ? `${why}; one worker would only overlap the loading with the ${pct(1 - (wait ?? 0))} of compute${withinNoise}, so the walk starts at 2`
          : why,
      });
      return;
    }
    if (rule?.kind === "precision") {
      const current = evidence.precision ?? String(knobs[knob] ?? "fp32");
      const lower = values.some((v) => typeof v === "string" && LOW_PRECISION.test(v));
      if (!LOW_PRECISION.test(current) && lower) {
        const compute = 1 - (wait ?? 0);
        ranked.push({
          knob,
          values,
          gain: 0.5 * compute + tie,
          why: `runs ${current} on a GPU with tensor cores (16-bit runs there several times faster)${busy}`,
        });
      } else {
        ranked.push({ knob, values, gain: 0.02 + tie, why: `already ${current}` });
      }
      return;
    }
    if (rule?.kind === "rollout") {
      const r = rankRollout(knob, values, evidence, knobs, rule.gain, tie);
      if ("skipped" in r) skipped.push({ knob, why: r.skipped });
      else ranked.push(r.ranked);
      return;
    }
    if (rule?.kind === "cpu-contention") {
      const other = otherWork(evidence);
      const threads = knobs[knob];
      if (other === null || other < CONTENDED_CORES) {
        skipped.push({
          knob,
          why:
            other === null
              ? "no reading of the machine's other work"
              : `other processes keep only ${other.toFixed(2)} of ${evidence.cpus ?? "?"} cores busy: fewer threads pay only when they hold cores`,
        });
        return;
      }
      // before the loader knobs when the loop waits for data (their walk reads wrong on contended threads)
      // and before the micro-batch phase on the CPU (the threads are the compute); else after it
      const waits = wait !== null && wait >= STARVED_MIN;
      const onCpu = evidence.gpuUtil === null;
      ranked.push({
        knob,
        values,
        gain: (waits || onCpu ? CONTENTION_GAIN : CONTENTION_LATE) + tie,
        why: `other processes keep ${other.toFixed(2)} of ${evidence.cpus ?? "?"} cores busy: each parallel op of the job's ${String(threads)} threads waits for the slowest of them`,
      });
      return;
    }
    const alters = knobSpec(knob)?.alters;
    const measurable = measurableValues(knob, values, evidence.rollout, knobs);
    ranked.push({
      knob,
      values: measurable.values,
      gain: 0.05 + tie,
      why: `no evidence either way${alters === undefined ? "" : `; ${alters}`}${measurable.why === null ? "" : `; ${measurable.why}`}`,
    });
  });
  ranked.sort((a, b) => b.gain - a.gain);
  return { ranked, skipped };
}

/**
 * What still limits the job after the tune, from the measurements of the configuration it ends with
 * (the winner's trial, else your configuration's): the closing lines of a tune.
 *
 * @example
 * ```ts
 * stillLimits({ dataWait: 0.6, cpuCores: 0.1, cpus: 2, gpuUtil: null }, { num_workers: 8 });
 * // ["still waits for data 60 % of step time with num_workers=8, its processes busy 0.10 of 2 cores: I/O-bound — the files the dataset reads (or its __getitem__) are the bottleneck"]
 * ```
 */
export function stillLimits(evidence: Pick<TrialEvidence, "dataWait" | "cpuCores" | "cpus" | "gpuUtil" | "hostBusy" | "workers">, knobs: Knobs): string[] {
  const out: string[] = [];
  const wait = evidence.dataWait;
  if (wait !== null && wait >= 0.1) {
    const workers = typeof knobs.num_workers === "number" ? ` with num_workers=${knobs.num_workers}` : "";
    const bound = loaderBound({ ...evidence, workers: evidence.workers ?? (typeof knobs.num_workers === "number" ? knobs.num_workers : null) });
    const cores = evidence.cpuCores != null && evidence.cpus != null ? `, its processes busy ${evidence.cpuCores.toFixed(2)} of ${evidence.cpus} cores` : "";
    // cores left idle: the fetch could spread over more loader workers before more cores are needed
    const idleCores = evidence.cpuCores != null && evidence.cpus != null && evidence.cpus - evidence.cpuCores >= 1;
    const why =
      bound === "io"
        ? ": I/O-bound — the files the dataset reads (or its __getitem__) are the bottleneck"
        : bound === "cpu"
          ? idleCores
            ? ": CPU-bound in too few processes — more loader workers (num_workers, up to the idle cores) would spread the dataset's __getitem__ / collate work"
            : ": CPU-bound — the dataset's __getitem__ / collate work is the bottleneck (more cores, or cheaper per-sample work)"
          : "";
    out.push(`still waits for data ${pct(wait)} of step time${workers}${cores}${why}`);
  }
  const other = otherWork(evidence);
  if (other !== null && other >= CONTENDED_CORES && evidence.cpus != null)
    out.push(
      `other processes kept ${other.toFixed(2)} of ${evidence.cpus} cores busy beside the job: its figures, and the winner's edge, hold for a machine this busy${typeof knobs.cpu_threads === "number" ? ` (the job ran ${knobs.cpu_threads} intra-op thread${knobs.cpu_threads === 1 ? "" : "s"})` : ""}`,
    );
  if (evidence.gpuUtil !== null && evidence.gpuUtil < 80 && (wait === null || wait < 0.1))
    out.push(`the GPU is busy ${evidence.gpuUtil.toFixed(0)} % of the time: the host side of each step (Python, launches, copies) is the bottleneck`);
  return out;
}
