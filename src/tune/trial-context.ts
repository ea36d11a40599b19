/**
 * What each trial of a tune is told before it runs (the best throughput so far and the noise between
 * trials, from the trials measured before it), and the throughputs of repeated configurations.
 *
 * @example
 * ```ts
 * const context = contextFor(measured, knobs, index);
 * ```
 * @module
 */
import { DEFAULT_STABLE_WITHIN } from "./options.ts";
import { knobsKey } from "./strategies/axis.ts";
import { trialNoise, withinTrialNoise } from "./strategies/noise.ts";
import type { TrialContext } from "./trial.ts";
import type { Knobs, TrialResult } from "./types.ts";

/** A trial's knobs and what it measured, in the order trials ran. */
export type Measured = readonly { knobs: Knobs; result: TrialResult }[];

/**
 * What a trial is told: a configuration measured before is re-measured to the end of its window; trial 0 has nothing to beat;
 * whether an earlier trial saw the job evaluate.
 *
 * @example
 * ```ts
 * contextFor([], { batch_size: 32 }, 0); // { best: null, noise: 0.02 }
 * ```
 */
export function contextFor(measured: Measured, knobs: Knobs, index: number): TrialContext {
  const context = measured.some((m) => knobsKey(m.knobs) === knobsKey(knobs))
    ? trialContext(measured, null)
    : index === 0
      ? { best: null, noise: DEFAULT_STABLE_WITHIN }
      : trialContext(measured, bestRate(measured));
  // a job seen evaluating: a step still running in a later trial may be its evaluation pass (window.ts)
  return measured.some((m) => m.result.evaluation?.ran === true) ? { ...context, evaluates: true } : context;
}

/** The fastest throughput of a trial that ran as given, null before any. */
function bestRate(measured: Measured): number | null {
  const rates = measured.filter((m) => m.result.end === "ok" && m.result.oomRecoveries === 0).map((m) => m.result.samplesPerSecond ?? 0);
  return rates.length > 0 ? Math.max(...rates) : null;
}

/** The best so far, and the noise between trials: the within-trial errors and the spread of repeated configurations (see window.ts). */
function trialContext(measured: Measured, best: number | null): TrialContext {
  const ok = measured.filter((m) => m.result.end === "ok" && m.result.stepSeconds.length > 0 && m.result.samplesPerSecond !== null);
  const within = ok.map((m) => withinTrialNoise(m.result.stepSeconds)).filter((v): v is number => v !== null);
  return { best, noise: Math.max(DEFAULT_STABLE_WITHIN, trialNoise(within, repeatedRates(ok))) };
}

/**
 * The throughputs of each configuration, grouped by its knobs, in the order first measured.
 *
 * @example
 * ```ts
 * repeatedRates(measured.filter((m) => m.result.end === "ok")); // [[101, 99], [130]]
 * ```
 */
export function repeatedRates(ok: Measured): number[][] {
  const repeats = new Map<string, number[]>();
  for (const m of ok) repeats.set(knobsKey(m.knobs), [...(repeats.get(knobsKey(m.knobs)) ?? []), m.result.samplesPerSecond as number]);
  return [...repeats.values()];
}

/**
 * The result of a trial that did not start because the tune was interrupted.
 *
 * @example
 * ```ts
 * interruptedResult().end; // "interrupted"
 * ```
 */
export function interruptedResult(): TrialResult {
  return {
    end: "interrupted",
    samplesPerSecond: null,
    stepSeconds: [],
    peakBytes: null,
    frameworkPeakBytes: null,
    durationS: 0,
    oomRecoveries: 0,
    failure: { kind: "interrupted", cause: "interrupted" },
  };
}
