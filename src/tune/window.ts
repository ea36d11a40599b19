/**
 * How long a trial measures: over a time window rather than a fixed step count. The warm-up is the
 * run record's (the steps the reporter flags: the first `--warmup`),
 * the trial stops once its throughput is stable, once the window or the step budget is spent, or
 * as soon as it is clearly slower than the best so far (while a step is still running, the samples
 * it can add bound the throughput from above). Pure: steps and the clock come in, a verdict comes out.
 *
 * One rate rule, a trial's and a run's: samples/s is Σ samples ÷ Σ (wait + compute) over the main
 * process's steady steps, warm-up left out by the run record's one rule (`isWarmupStep`); a run's
 * `samples_per_s` (src/record/timeline/fold.ts) and a trial's {@link rateOf} over {@link trialStep}s
 * apply it alike. A trial leaves out more, on purpose, because it is short and compares configurations:
 * the loader's queued first steps ({@link loaderQueueSteps}: read at the main process's speed, they
 * favour more workers), steps out of line ({@link outOfLine}: an evaluation pass inside a step), and it
 * counts a step's samples from the batch_size knob where the job reported none ({@link samplesFromKnob}).
 * A run keeps them all: over hours the queue and the evaluation are the job's throughput.
 *
 * @example
 * ```ts
 * const v = windowVerdict(steps, now, { warmupSteps: 1, maxSteps: 20, minSteps: 3, windowS: 10, stableWithin: 0.02 }, { best: 900, noise: 0.02 });
 * if (v !== null) control.requestStop(v.detail);
 * ```
 * @module
 */
import { isWarmupStep } from "../record/timeline/index.ts";
import { mean as meanOf } from "../stats.ts";
import type { Knobs } from "./types.ts";
import { NOISE_Z, withinTrialNoise } from "./strategies/noise.ts";

/**
 * The samples of a step the job did not count (the attach could not find the batch dimension): the
 * batch_size knob's value × the batches the step fetched (else the accumulation knob, else 1); null
 * without a batch_size knob.
 *
 * @example
 * ```ts
 * samplesFromKnob({ batch_size: 32 }, 4); // 128
 * ```
 */
export function samplesFromKnob(knobs: Knobs, batches: number | null): number | null {
  const micro = knobs.batch_size;
  if (typeof micro !== "number") return null;
  const acc = batches !== null && batches >= 1 ? batches : typeof knobs.accumulation === "number" ? knobs.accumulation : 1;
  return micro * acc;
}

const finiteNumber = (value: unknown): number | null => (typeof value === "number" && Number.isFinite(value) ? value : null);

/**
 * A step as a trial measures it, from the channel's step message while the trial runs or the run
 * record's step entry after it (one rule for both): its seconds are wait + compute, as the run record's
 * `stepSeconds`; samples the job did not report come from the knob ({@link samplesFromKnob}).
 *
 * @example
 * ```ts
 * trialStep({ t: 5, samples: null, wait_s: 0.1, compute_s: 0.4, warmup: false, accumulation: 2 }, { batch_size: 16 }).samples; // 32
 * ```
 */
export function trialStep(
  step: { t: number; samples?: unknown; wait_s?: unknown; compute_s?: unknown; warmup?: unknown; accumulation?: unknown; source?: unknown },
  knobs: Knobs,
): StepTime {
  const batches = finiteNumber(step.accumulation);
  return {
    t: step.t,
    samples: finiteNumber(step.samples) ?? samplesFromKnob(knobs, batches),
    seconds: (finiteNumber(step.wait_s) ?? 0) + (finiteNumber(step.compute_s) ?? 0),
    warmup: step.warmup === true,
    batches,
    printed: step.source === "progress",
  };
}

/** One step of the job's main process as the trial sees it. */
export interface StepTime {
  /** when the step was reported (its end), seconds */
  t: number;
  samples: number | null;
  /** wait + compute */
  seconds: number;
  /** the SDK flagged it as warm-up */
  warmup: boolean;
  /** batches the step fetched (the attach's count between two optimizer steps), when reported */
  batches?: number | null;
  /** read from the job's printed progress, not counted by the attach or the SDK */
  printed?: boolean;
}

/** The measurement window of a trial. */
export interface WindowOptions {
  /** leading steps always left out (the SDK flags them too) */
  warmupSteps: number;
  /** steady steps at most */
  maxSteps: number;
  /** steady steps at least before throughput may count as stable */
  minSteps: number;
  /** seconds of steady steps at most, once the trial has K steady steps */
  windowS: number;
  /**
   * the relative standard error of its mean a trial measures toward before its window may end it: K
   * comes from the noise the job's steps show ({@link noiseSteps}), at most `maxSteps`. Absent (a
   * `--window` the user gave, which overrides): K = {@link MIN_STEADY_STEPS}
   */
  noiseTarget?: number;
  /** stable: both halves of the steady steps within this share of each other, and the standard error under half of it */
  stableWithin: number;
  /**
   * seconds of steady wall time a trial measures at least (default {@link MIN_STEADY_S}), stretched by
   * the trial-to-trial noise seen so far: no stop (stable, steps, slower) comes before it
   */
  minSeconds?: number;
  /**
   * steady steps every decision waits for when the batches arrive in waves, the stop as clearly
   * slower by a step in flight included (see {@link loaderWaveSteps}); absent: no waves
   */
  waveSteps?: number;
  /**
   * leading steps left out besides the warm-up: the batches the loader's workers queued while the job
   * started (see {@link loaderQueueSteps}); absent: none
   */
  queueSteps?: number;
}

/**
 * The steady steps a trial with `workers` DataLoader workers measures before any decision: two waves.
 * Each worker loads a whole batch, so batches come in waves of `workers` (all ready at once, then a
 * wait for the next wave): fewer steps than two waves are a part of one, and read far too fast or far
 * too slow. Without workers there are no waves.
 *
 * @example
 * ```ts
 * loaderWaveSteps(8); // 16
 * loaderWaveSteps(0); // 0
 * ```
 */
export function loaderWaveSteps(workers: unknown): number {
  return typeof workers === "number" && Number.isInteger(workers) && workers > 0 ? 2 * workers : 0;
}

/**
 * The leading steps a trial with `workers` DataLoader workers leaves out: the batches those workers
 * queued (`prefetch_factor` each, PyTorch's default 2) while the job's first steps ran. They are read
 * at the speed of the main process alone, far faster than the workers can load: counted, they make
 * more workers look faster the larger their queue (seen: 90 samples/s read from a queue, 9 past it).
 * A trial's rule only: a run's record does not know its loader's settings.
 *
 * @example
 * ```ts
 * loaderQueueSteps(8, null); // 16
 * loaderQueueSteps(4, 4); // 16
 * loaderQueueSteps(0, 2); // 0
 * ```
 */
export function loaderQueueSteps(workers: unknown, prefetchFactor: unknown): number {
  if (typeof workers !== "number" || !Number.isInteger(workers) || workers <= 0) return 0;
  const each = typeof prefetchFactor === "number" && Number.isInteger(prefetchFactor) && prefetchFactor >= 1 ? prefetchFactor : 2;
  return workers * each;
}

/** What the trial knows of the other trials. */
export interface WindowContext {
  /** mean samples/s of the best configuration so far, null before there is one */
  best: number | null;
  /** relative noise of one trial's throughput */
  noise: number;
  /** an earlier trial saw the job evaluate (a pass inside a step, left out): a step in flight may be one, and bounds nothing */
  evaluates?: boolean;
}

/** Why a trial's measurement ended. */
export type WindowStop = "stable" | "window" | "steps" | "slower";

/**
 * How long a finished step may go unheard of: the SDK and the attach send steps in one write at most
 * every 50 ms (`SEND_EVERY_S`, python/brim/_tracking.py), so the time since the last report
 * over-states how long the next step has been running by up to that much.
 */
export const REPORT_DELAY_S = 0.1;

/**
 * Steady steps every decision of a trial rests on at least: the fewest from which its own error can be
 * told (three, the least `withinTrialNoise` takes). The window, the step budget and the stop as
 * clearly slower wait for them; only the trial time limit ends a trial with fewer. The window waits
 * for more where the job's steps are noisier (K, {@link noiseSteps}).
 */
export const MIN_STEADY_STEPS = 3;

/**
 * K for a job whose steady steps took `perSampleSeconds` (seconds per sample, or per step): the steps a
 * trial needs for the relative standard error of its mean ({@link withinTrialNoise}, by batch means) to
 * fall to `target`, projected from the steps so far as n × (error / target)², at least
 * {@link MIN_STEADY_STEPS} and at most `cap`. Fewer than three steps cannot show their noise: K is then
 * {@link MIN_STEADY_STEPS} until they do.
 *
 * @example
 * ```ts
 * noiseSteps([1, 1.01, 0.99, 1], 0.01, 20); // 3: steps within 1 % of each other
 * noiseSteps([5, 9, 6, 12, 7, 18], 0.01, 20); // 20: steps of 5–18 s need more than the budget
 * ```
 */
export function noiseSteps(perSampleSeconds: readonly number[], target: number, cap: number): number {
  const error = withinTrialNoise(perSampleSeconds);
  if (error === null || !(target > 0)) return Math.min(MIN_STEADY_STEPS, Math.max(cap, 1));
  const needed = Math.ceil(perSampleSeconds.length * (error / target) ** 2);
  return Math.max(MIN_STEADY_STEPS, Math.min(needed, cap));
}

/** The most steady steps the job's noise asks of a trial before its window may end it (`--steps` caps it too). */
export const MAX_NOISE_STEPS = 20;

/** The standard error a trial's mean aims at by default, for K ({@link noiseSteps}): half the default stability target (±2 %). */
export const DEFAULT_NOISE_TARGET = 0.01;

/**
 * How long a trial takes on this job, measured from trial 0's first step: its start-up, its warm-up
 * steps, and the K steady steps this job's step noise asks for ({@link noiseSteps}), and `expectedS`
 * (the ledger's prediction for the next one).
 *
 * @example
 * ```ts
 * trialTimeText({ fixedCostS: 4, warmupSteps: 3, stepSeconds: [6, 6, 6] }, 45); // "a trial takes ≈ 45 s on this job: …"
 * ```
 */
export function trialTimeText(
  result: { fixedCostS?: number | null; warmupSteps?: number; stepSeconds: readonly number[] },
  expectedS: number,
  cap = MAX_NOISE_STEPS,
): string {
  const sorted = [...result.stepSeconds].sort((a, b) => a - b);
  const step = sorted[Math.floor(sorted.length / 2)];
  const k = noiseSteps(result.stepSeconds, DEFAULT_NOISE_TARGET, cap);
  const error = withinTrialNoise(result.stepSeconds);
  const within = `±${(DEFAULT_NOISE_TARGET * 100).toFixed(0)} %`;
  const why =
    error === null
      ? `${MIN_STEADY_STEPS} steady steps at least`
      : `${k} steady steps at least (K: ${result.stepSeconds.length} steps measured their mean within ±${(error * 100).toFixed(1)} %; ${k >= cap && error > DEFAULT_NOISE_TARGET ? `${k} is the most K asks, short of ${within}` : `${k} bring it within ${within}`})`;
  const parts = [
    result.fixedCostS != null ? `start-up ${result.fixedCostS.toFixed(1)} s before its first step` : null,
    result.warmupSteps !== undefined ? `${result.warmupSteps} warm-up step${result.warmupSteps === 1 ? "" : "s"} left out` : null,
    step !== undefined ? `then ${why}, of ≈ ${step >= 1 ? step.toFixed(1) : step.toPrecision(2)} s each here` : null,
  ].filter((part): part is string => part !== null);
  return `a trial takes ≈ ${Math.round(expectedS)} s on this job: ${parts.join(", ")}`;
}

/** Seconds of steady wall time every trial measures at least, before the noise stretches it. */
export const MIN_STEADY_S = 1;

/**
 * The steady wall time a trial measures at least: {@link MIN_STEADY_S} (or the option), times the
 * noise between trials over the stability target when that is larger, at most a third of the window.
 *
 * @example
 * ```ts
 * minimumSeconds({ warmupSteps: 1, maxSteps: 20, minSteps: 3, windowS: 10, stableWithin: 0.02 }, 0.04); // 2
 * ```
 */
export function minimumSeconds(options: WindowOptions, noise: number): number {
  const base = options.minSeconds ?? MIN_STEADY_S;
  return Math.min(base * Math.max(1, noise / options.stableWithin), Math.max(base, options.windowS / 3));
}

/** The default share of the best a trial must fall under to be stopped as clearly slower. */
export const SLOWER_MARGIN = 0.2;

const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);

/**
 * A step that fetched more than this many times the batches of the leanest step of the trial is out
 * of line: an evaluation pass between two optimizer steps (its own DataLoader, counted in the step by
 * the attach), not a training step. It is left out of the trial's measurement.
 */
export const OUT_OF_LINE_BATCHES = 2;

/**
 * Which steps are out of line ({@link OUT_OF_LINE_BATCHES}): judged against the fewest batches any
 * step of the trial fetched, warm-up included; no step is when no step reports its batches.
 *
 * @example
 * ```ts
 * outOfLine([{ batches: 1 }, { batches: 101 }, { batches: 1 }]); // [false, true, false]
 * ```
 */
export function outOfLine(steps: readonly { batches?: number | null }[]): boolean[] {
  let fewest: number | null = null;
  for (const s of steps) if (typeof s.batches === "number" && s.batches >= 1 && (fewest === null || s.batches < fewest)) fewest = s.batches;
  return steps.map((s) => fewest !== null && typeof s.batches === "number" && s.batches > OUT_OF_LINE_BATCHES * fewest);
}

/**
 * Which steps a trial measures: not warm-up by the run record's one rule ({@link isWarmupStep}: the
 * steps the reporter flagged, the first `--warmup`), as its run's `samples_per_s` does; beyond the
 * run's rule (see the module doc), not {@link outOfLine} (an evaluation pass inside a step) and not
 * among the first `queueSteps` (the loader's queue, {@link loaderQueueSteps}).
 *
 * @example
 * ```ts
 * steadyMask([{ warmup: true, batches: 1 }, { warmup: false, batches: 101 }, { warmup: false, batches: 1 }]); // [false, false, true]
 * ```
 */
export function steadyMask(steps: readonly { warmup: boolean; batches?: number | null }[], queueSteps = 0): boolean[] {
  const odd = outOfLine(steps);
  return steps.map((step, i) => i >= queueSteps && !isWarmupStep(step) && odd[i] !== true);
}

/**
 * Splits steps into warm-up, queued ({@link loaderQueueSteps}), out-of-line ({@link outOfLine}) and steady (see {@link steadyMask}).
 * `warmupSteps` is kept for callers; the reporter has already applied it.
 *
 * @example
 * ```ts
 * splitWarmup([{ t: 1, samples: 8, seconds: 3, warmup: true }, { t: 2, samples: 8, seconds: 1, warmup: false }], 1).warmup; // 1
 * ```
 */
export function splitWarmup(
  steps: readonly StepTime[],
  _warmupSteps: number,
  queueSteps = 0,
): { warmup: number; queued: number; outOfLine: number; steady: StepTime[] } {
  const mask = steadyMask(steps, queueSteps);
  const steady = steps.filter((_, i) => mask[i]);
  const warmup = steps.filter((step) => isWarmupStep(step)).length;
  const queued = steps.filter((step, i) => i < queueSteps && !isWarmupStep(step)).length;
  return { warmup, queued, outOfLine: steps.length - steady.length - warmup - queued, steady };
}

/**
 * The steps a trial measures from: steps read from the job's printed progress are the last resort,
 * dropped once the attach or the SDK counts steps, and while the attach has seen the job's DataLoader
 * (`attached`) and its first counted step is still to come.
 *
 * @example
 * ```ts
 * countedSteps([{ t: 1, samples: null, seconds: 0.1, warmup: false, printed: true }], true); // []
 * ```
 */
export function countedSteps(steps: readonly StepTime[], attached: boolean): StepTime[] {
  const printed = steps.some((s) => s.printed === true);
  if (!printed || !(attached || steps.some((s) => s.printed !== true))) return [...steps];
  return steps.filter((s) => s.printed !== true);
}

/** What a trial's rate counts: samples, or, where no step of the job said its samples, batches (the attach's count of the batches a step fetched) or steps. */
export type RateUnit = "samples" | "batches" | "steps";

/**
 * The steps in the unit their rate is counted in. Steps that say their samples count samples. A
 * trial none of whose steps does (the batch dimension not found, no batch-size knob) keeps the steps
 * brim counted: batches a second where every step says its batches (the micro-batch stays what the
 * job sets, so batches/s follows samples/s for any knob that does not change the micro-batch), else
 * steps a second (valid while the knob does not change the samples of a step).
 *
 * @example
 * ```ts
 * inRateUnit([{ t: 1, samples: null, seconds: 0.5, warmup: false, batches: 2 }]).unit; // "batches"
 * ```
 */
export function inRateUnit(steps: readonly StepTime[]): { steps: StepTime[]; unit: RateUnit } {
  if (steps.length === 0 || steps.some((s) => s.samples !== null && s.samples > 0)) return { steps: [...steps], unit: "samples" };
  const batches = steps.every((s) => typeof s.batches === "number" && s.batches >= 1);
  return { steps: steps.map((s) => ({ ...s, samples: batches ? (s.batches as number) : 1 })), unit: batches ? "batches" : "steps" };
}

/**
 * How a rate in `unit` reads, and what brim could not see when it is not samples.
 *
 * @example
 * ```ts
 * rateLabel("batches"); // "batches/s"
 * ```
 */
export function rateLabel(unit: RateUnit | undefined): string {
  return `${unit ?? "samples"}/s`;
}

/**
 * Why a tune compared batches/s or steps/s and what would let it compare samples/s, or null for samples.
 *
 * @example
 * ```ts
 * unseenSamples("steps"); // "brim compared steps/s: no step of the job said its samples …"
 * ```
 */
export function unseenSamples(unit: RateUnit | undefined): string | null {
  if (unit === undefined || unit === "samples") return null;
  const valid = unit === "batches" ? "valid while the micro-batch stays what the job sets" : "valid while a knob does not change the samples of a step";
  return `brim compared ${rateLabel(unit)}: no step of the job said its samples (brim could not find the batch dimension, and no batch-size knob gives it), so ${rateLabel(unit)} stands in for samples/s (${valid}); to compare samples/s, name the batch size as a knob (--knob batch_size=N) or report the samples (brim.track(loader, samples=lambda batch: …))`;
}

/**
 * Samples per second over steady steps: Σ samples / Σ seconds; null without samples or time.
 *
 * @example
 * ```ts
 * rateOf([{ t: 1, samples: 32, seconds: 0.5, warmup: false }]); // 64
 * ```
 */
export function rateOf(steps: readonly StepTime[]): number | null {
  const samples = sum(steps.map((s) => s.samples ?? 0));
  const seconds = sum(steps.map((s) => s.seconds));
  return samples > 0 && seconds > 0 ? samples / seconds : null;
}

/**
 * Whether steady steps give a stable throughput: at least `minSteps`, the two halves within
 * `stableWithin` of each other, and the standard error of the mean per-sample time under half of it.
 *
 * @example
 * ```ts
 * isStable(steadySteps, 3, 0.02); // true for steps within ±1 % of each other
 * ```
 */
export function isStable(steady: readonly StepTime[], minSteps: number, stableWithin: number): boolean {
  if (steady.length < Math.max(2, minSteps)) return false;
  const half = Math.floor(steady.length / 2);
  const a = rateOf(steady.slice(0, half));
  const b = rateOf(steady.slice(steady.length - half));
  if (a === null || b === null || Math.abs(a / b - 1) > stableWithin) return false;
  const perSample = steady.map((s) => s.seconds / Math.max(1, s.samples ?? 1));
  const mean = meanOf(perSample) ?? 0;
  const sd = Math.sqrt(sum(perSample.map((x) => (x - mean) ** 2)) / (perSample.length - 1));
  return mean > 0 && sd / mean / Math.sqrt(perSample.length) <= stableWithin / 2;
}

/**
 * Whether the trial should stop now, and why; null to keep measuring.
 *
 * @example
 * ```ts
 * windowVerdict(steps, now, options, { best: null, noise: 0.01 }); // { stop: "stable", detail: "throughput stable within ±2 % over 4 steps" }
 * ```
 */
export function windowVerdict(
  steps: readonly StepTime[],
  now: number,
  options: WindowOptions,
  context: WindowContext,
): { stop: WindowStop; detail: string; bound?: number; rate?: number } | null {
  const { steady } = splitWarmup(steps, options.warmupSteps, options.queueSteps ?? 0);
  const rate = rateOf(steady);
  const pctOf = (share: number): string => `${(share * 100).toFixed(0)} %`;
  const first = steady[0];
  const measured = first === undefined ? 0 : now - (first.t - first.seconds);
  // fast steps: a handful of them is milliseconds, too short to see the machine's own noise
  const floor = minimumSeconds(options, context.noise);
  const enough = measured >= floor;
  // K steady steps at least before a measurement ends (a window of 10 s over steps of 18 s is not
  // one); only the bound of a step in flight (below) may stop a clearly slower trial before them
  const waves = options.waveSteps ?? 0;
  const counted = steady.length >= Math.max(MIN_STEADY_STEPS, options.minSteps, waves);
  if (counted && steady.length >= options.maxSteps && enough)
    return { stop: "steps", detail: `${steady.length} measured steps in ${measured.toFixed(1)} s (the step budget, at least ${floor.toFixed(1)} s)` };
  const perSample = steady.map((s) => s.seconds / Math.max(1, s.samples ?? 1));
  // a time window over slow, noisy steps is a few draws: no decision but a clear one comes before K steps
  const k = options.noiseTarget === undefined ? MIN_STEADY_STEPS : noiseSteps(perSample, options.noiseTarget, Math.min(options.maxSteps, MAX_NOISE_STEPS));
  if (counted && steady.length >= k && enough && isStable(steady, options.minSteps, options.stableWithin))
    return { stop: "stable", detail: `throughput stable within ±${pctOf(options.stableWithin)} over ${steady.length} steps in ${measured.toFixed(1)} s` };
  if (counted && steady.length >= k && measured >= options.windowS)
    return {
      stop: "window",
      detail: `the ${options.windowS} s measurement window ended (${steady.length} steps${k > MIN_STEADY_STEPS ? `: K = ${k} for this job's step noise` : ""})`,
    };
  // an early stop needs evidence beyond the noise: one steady step at least, never a first step still
  // running, and a step in flight counts only once it has run far longer than any steady step did
  if (context.best !== null && context.best > 0 && steady.length >= 1) {
    const margin = Math.max(SLOWER_MARGIN, 4 * context.noise);
    const limit = context.best * (1 - margin);
    // before K steps, only a rate whose own interval lies wholly under the limit
    const clear = steady.length >= k || (rate !== null && rate * (1 + NOISE_Z * (withinTrialNoise(perSample) ?? Infinity)) < limit);
    if (counted && enough && rate !== null && rate < limit && clear) {
      return {
        stop: "slower",
        rate,
        detail: `${rate.toFixed(1)} samples/s over ${steady.length} steps in ${measured.toFixed(1)} s, more than ${pctOf(margin)} below the best so far (${context.best.toFixed(1)})`,
      };
    }
    // a step in flight can add at most the samples of the last one: the throughput cannot end above this,
    // unless it is left out of the measurement: a job with a step left out after its first steady one
    // (an evaluation pass, a recompile), here or in an earlier trial, may be in such a step now
    const mask = steadyMask(steps, options.queueSteps ?? 0);
    const firstKept = mask.indexOf(true);
    const leftOut = context.evaluates === true || mask.some((kept, i) => !kept && i > firstKept);
    const last = steps[steps.length - 1];
    const perStep = last?.samples ?? null;
    const longest = Math.max(...steady.map((s) => s.seconds));
    if (!leftOut && last !== undefined && perStep !== null && perStep > 0) {
      const inFlight = now - last.t - REPORT_DELAY_S;
      const bound = (sum(steady.map((s) => s.samples ?? 0)) + perStep) / (sum(steady.map((s) => s.seconds)) + inFlight);
      if (steady.length >= waves && inFlight > Math.max(floor, 3 * longest) && bound < context.best * (1 - Math.max(margin, 0.3))) {
        return {
          stop: "slower",
          bound,
          detail: `at most ${bound.toFixed(1)} samples/s (a step of ${perStep} samples still running after ${inFlight.toFixed(1)} s), below the best so far (${context.best.toFixed(1)})`,
        };
      }
    }
  }
  return null;
}
