/**
 * The record of one search: runs trials through the runner within the trial and time budgets, tells
 * the caller about each one, and answers what has been measured so far.
 *
 * @example
 * ```ts
 * const ledger = new Ledger(runner, options, axis);
 * const trial = await ledger.run({ batch_size: 32 }, "memory probe", null);
 * if (trial === null) ledger.stopReason; // "max_trials" | "max_time" | ...
 * ```
 * @module
 */
import type { Knobs, SearchOptions, SearchTrial, StopReason, TrialResult, TrialRunner } from "../types.ts";
import { knobsKey, type MicroAxis } from "./axis.ts";
import { noiseEstimate, withinTrialNoise, type Measured, type NoiseEstimate } from "./noise.ts";
import { MIN_STEADY_STEPS } from "../window.ts";

/** What the measurements say about one configuration (trials with the same knobs). */
export interface ConfigEstimate extends Measured {
  key: string;
  knobs: Knobs;
  /** indices of the trials that ran and fit */
  indices: number[];
  /** a trial of it was stopped early as clearly slower: the mean is an upper bound, and it may not win */
  bounded?: boolean;
}

/** Trial ends that mean "does not fit": the memory ran out or the cap was hit. */
const MEMORY_ENDS = new Set(["gpu_oom", "host_oom", "cap_exceeded"]);

/**
 * Whether a trial ran as given: ended ok, with no out-of-memory split by the SDK.
 *
 * @example
 * ```ts
 * ranAsGiven({ end: "ok", oomRecoveries: 1, ... }); // false: the knob value did not fit as given
 * ```
 */
export function ranAsGiven(result: TrialResult): boolean {
  return result.end === "ok" && result.oomRecoveries === 0;
}

/**
 * Whether a trial shows the configuration does not fit in memory: an out-of-memory end, the cap, or
 * an SDK split of the micro-batch.
 *
 * @example
 * ```ts
 * didNotFit({ end: "cap_exceeded", ... }); // true
 * ```
 */
export function didNotFit(result: TrialResult): boolean {
  return MEMORY_ENDS.has(result.end) || (result.end === "ok" && result.oomRecoveries > 0);
}

/**
 * The peak a trial measured: the capped memory, else the framework's own peak.
 *
 * @example
 * ```ts
 * peakOf(trial.result); // bytes or null
 * ```
 */
export function peakOf(result: TrialResult): number | null {
  return result.peakBytes ?? result.frameworkPeakBytes;
}

/**
 * Trials and budgets of one search.
 *
 * @example
 * ```ts
 * const ledger = new Ledger(runner, { capBytes, maxTrials: 10, maxTimeS: 600, now }, axis);
 * await ledger.run({ batch_size: 8 }, "baseline", null);
 * ledger.estimates(); // [{ key, knobs, mean, count: 1, indices: [0] }]
 * ```
 */
export class Ledger {
  readonly trials: SearchTrial[] = [];
  stopReason: StopReason | null = null;
  /** the search's current estimate of its total trial count, for progress */
  planned = 1;
  /** the trial index of the configuration the search would pick now */
  bestIndex: () => number | null = () => null;
  /** the first trial that came back not comparable (its micro-batch's samples did not follow), and the finding */
  dropped: { trial: number; reason: string } | null = null;
  /** what the search does with that trial: true, it goes on without the micro-batch knob; false (the default), it stops as untrusted */
  whenNotComparable: (trial: SearchTrial) => boolean = () => false;
  private readonly runner: TrialRunner;
  private readonly options: SearchOptions;
  private readonly axis: MicroAxis;
  private readonly started: number;

  constructor(runner: TrialRunner, options: SearchOptions, axis: MicroAxis) {
    this.runner = runner;
    this.options = options;
    this.axis = axis;
    this.started = options.now();
  }

  /**
   * Runs one trial unless a budget forbids it (then sets {@link stopReason} and returns null). The
   * first trial always runs. `predictedPeakBytes` is the search's expectation (line + margin), kept
   * with the trial.
   */
  async run(knobs: Knobs, purpose: string, predictedPeakBytes: number | null): Promise<SearchTrial | null> {
    if (this.stopReason !== null) return null;
    const index = this.trials.length;
    if (index > 0) {
      const asked = this.options.stopWhen?.() ?? null;
      if (asked !== null) {
        this.stopReason = asked;
        return null;
      }
      if (index >= this.options.maxTrials) {
        this.stopReason = "max_trials";
        return null;
      }
      const elapsed = this.options.now() - this.started;
      if (elapsed + this.predictDuration(knobs) > this.options.maxTimeS) {
        this.stopReason = "max_time";
        return null;
      }
    }
    this.planned = Math.min(this.options.maxTrials, Math.max(this.planned, index + 1));
    this.options.onTrial?.({ index, knobs, purpose, bestIndex: this.bestIndex(), plannedTotal: this.planned });
    const result = await this.runner.run(knobs, purpose);
    const trial: SearchTrial = { index, knobs, purpose, result, predictedPeakBytes };
    this.trials.push(trial);
    if (result.end === "interrupted") this.stopReason = "interrupted";
    if (result.notComparable !== undefined && this.dropped === null) {
      this.dropped = { trial: index, reason: result.notComparable };
      if (!this.whenNotComparable(trial)) this.stopReason ??= "untrusted";
    }
    this.options.onTrial?.({ index, knobs, purpose, result, bestIndex: this.bestIndex(), plannedTotal: this.planned });
    return trial;
  }

  /** Raises the planned total to at least `index + remaining` (never above maxTrials). */
  expect(remaining: number): void {
    this.planned = Math.min(this.options.maxTrials, Math.max(this.planned, this.trials.length + remaining));
  }

  /**
   * Seconds a trial with `knobs` is expected to take: the largest start-up seen (wall time not spent in
   * steady steps) plus as many steps as the trials ran, each as long as the nearest measured
   * micro-batch's per-sample time says, plus 10 %: the window bounds the steps, but never below the
   * most steps a trial its window ended had to measure (K, from the job's noise).
   */
  predictDuration(knobs: Knobs): number {
    const m = this.axis.microOf(knobs);
    let overhead = 0;
    let steps = 0;
    let perSample: number | null = null;
    let nearest = Infinity;
    let longest = 0;
    let held = MIN_STEADY_STEPS;
    for (const { knobs: k, result } of this.trials) {
      longest = Math.max(longest, result.durationS);
      if (result.end !== "ok" || result.stepSeconds.length === 0) continue;
      // K holds every stop but slower: a trial ended by its window, its steps or as stable measured at least K
      if (result.stoppedBy != null && result.stoppedBy !== "slower") held = Math.max(held, result.stepSeconds.length);
      const stepTotal = result.stepSeconds.reduce((a, b) => a + b, 0);
      overhead = Math.max(overhead, result.durationS - stepTotal);
      steps = Math.max(steps, result.stepSeconds.length);
      const mk = this.axis.microOf(k);
      if (m === null || mk === null) {
        perSample = Math.max(perSample ?? 0, stepTotal / result.stepSeconds.length);
        continue;
      }
      const distance = Math.abs(Math.log(m / mk));
      if (distance < nearest) {
        nearest = distance;
        perSample = stepTotal / result.stepSeconds.length / mk;
      }
    }
    if (perSample === null) return longest;
    const step = m === null ? perSample : perSample * m;
    // a trial measures for at most its window, plus the warm-up step and the step in flight
    const window = this.options.maxStepS;
    // (and never fewer than the steady steps the job's noise held a trial to, whatever the window)
    const least = (held + 1) * step;
    return 1.1 * (overhead + Math.min(steps * step, window === undefined ? Infinity : Math.max(least, window + 2 * step)));
  }

  /** Estimates of every configuration that ran as given with a measured throughput. */
  estimates(): ConfigEstimate[] {
    const byKey = new Map<string, ConfigEstimate & { sum: number }>();
    // a configuration that ran to the end of its measurement is known by those trials alone
    const measured = new Set(this.trials.filter((t) => ranAsGiven(t.result) && t.result.samplesPerSecond !== null).map((t) => knobsKey(t.knobs)));
    for (const t of this.trials) {
      const sps = t.result.samplesPerSecond;
      const slower = t.result.end === "slower";
      if ((!ranAsGiven(t.result) && !slower) || sps === null || !(sps > 0) || t.result.notComparable !== undefined) continue;
      const key = knobsKey(t.knobs);
      if (slower && measured.has(key)) continue;
      const e = byKey.get(key) ?? { key, knobs: t.knobs, indices: [], mean: 0, count: 0, sum: 0 };
      if (slower) e.bounded = true;
      e.sum += sps;
      e.count++;
      e.mean = e.sum / e.count;
      e.indices.push(t.index);
      byKey.set(key, e);
    }
    return [...byKey.values()].map(({ key, knobs, indices, mean, count, bounded }) => ({
      key,
      knobs,
      indices,
      mean,
      count,
      ...(bounded === true ? { bounded } : {}),
    }));
  }

  /** The estimate of the configuration `knobs`, if it ran as given. */
  estimate(knobs: Knobs): ConfigEstimate | undefined {
    const key = knobsKey(knobs);
    return this.estimates().find((e) => e.key === key);
  }

  /** Trials with exactly these knobs. */
  trialsOf(knobs: Knobs): SearchTrial[] {
    const key = knobsKey(knobs);
    return this.trials.filter((t) => knobsKey(t.knobs) === key);
  }

  /** The relative noise of one trial's throughput, from all trials so far (see noise.ts). */
  noise(): number {
    return this.noiseEstimate().noise;
  }

  /** {@link noise} and where it comes from: repeats of a configuration in this tune, or assumed before any. */
  noiseEstimate(): NoiseEstimate {
    const within: number[] = [];
    for (const t of this.trials) {
      if (!ranAsGiven(t.result)) continue;
      const r = withinTrialNoise(t.result.stepSeconds);
      if (r !== null) within.push(r);
    }
    const repeats = this.estimates()
      .filter((e) => e.count > 1)
      .map((e) => e.indices.map((i) => this.trials[i]?.result.samplesPerSecond ?? e.mean));
    return noiseEstimate(within, repeats);
  }
}
