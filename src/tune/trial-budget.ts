/**
 * The budget line a tune says once trial 0's first steady step is in: how long a trial takes on this
 * job, measured from its own start-up, warm-up and first steady step, and how many trials that leaves
 * in `--max-time`. Before trial 0 brim cannot know it: a job of 5–18 s steps and one of 5 ms steps
 * take the same flags.
 *
 * @example
 * ```ts
 * firstStepBudget({ startedAt: 100, steps, window, maxTimeS: 1200 });
 * // "budget: a trial takes ≈ 64 s on this job, measured from trial 0's first step: …; --max-time 1200 s holds ≈ 18 trials"
 * ```
 * @module
 */
import { MIN_STEADY_STEPS, splitWarmup, type StepTime, type WindowOptions } from "./window.ts";

/** What trial 0 has shown when its first steady step lands. */
export interface FirstSteps {
  /** when the trial's process started, seconds (the clock of the steps' `t`) */
  startedAt: number;
  /** the main process's steps so far */
  steps: readonly StepTime[];
  window: WindowOptions;
  maxTimeS: number;
}

const seconds = (s: number): string => (s >= 10 ? s.toFixed(0) : s.toFixed(1));

/**
 * The budget line from trial 0's first steady step, or null before it. A trial is its start-up, its
 * warm-up and queued steps as trial 0 ran them, then its measurement: K steady steps at least, and
 * otherwise until stable, `--steps` or the window, whichever first (the steps' noise may ask more).
 *
 * @example
 * ```ts
 * firstStepBudget({ startedAt: 0, steps: [{ t: 10, samples: 8, seconds: 6, warmup: true }, { t: 16, samples: 8, seconds: 6, warmup: false }],
 *   window: { warmupSteps: 1, maxSteps: 20, minSteps: 3, windowS: 10, stableWithin: 0.02 }, maxTimeS: 600 });
 * // "budget: a trial takes ≈ 34 s on this job, measured from trial 0's first step: start-up 4.0 s, 1 warm-up step of 6.0 s, then 3 steady steps at least of ≈ 6.0 s …"
 * ```
 */
export function firstStepBudget({ startedAt, steps, window, maxTimeS }: FirstSteps): string | null {
  const { steady } = splitWarmup(steps, window.warmupSteps, window.queueSteps ?? 0);
  const step = steady[0];
  const first = steps[0];
  if (step === undefined || first === undefined) return null;
  const startUp = Math.max(0, first.t - first.seconds - startedAt);
  const before = steps.slice(0, steps.indexOf(step));
  const leftOut = before.reduce((a, s) => a + s.seconds, 0);
  const least = Math.max(MIN_STEADY_STEPS, window.minSteps, window.waveSteps ?? 0);
  const measuring = Math.max(least * step.seconds, Math.min(window.windowS, window.maxSteps * step.seconds));
  const total = startUp + leftOut + measuring;
  const fits = Math.max(1, Math.floor(maxTimeS / total));
  return (
    `budget: a trial takes ≈ ${seconds(total)} s on this job, measured from trial 0's first step: start-up ${seconds(startUp)} s, ` +
    `${before.length} step${before.length === 1 ? "" : "s"} left out (warm-up) of ${seconds(leftOut)} s, then ${least} steady steps at least of ≈ ${seconds(step.seconds)} s ` +
    `(until stable, ${window.maxSteps} steps or ${window.windowS} s${window.noiseTarget === undefined ? "" : ", longer where its steps are noisy"}); ` +
    `--max-time ${Math.round(maxTimeS)} s holds ≈ ${fits} trial${fits === 1 ? "" : "s"}`
  );
}

/**
 * Says trial 0's budget line once, at its first steady step; its clock starts as the trial does.
 *
 * @example
 * ```ts
 * const budget = new BudgetLine((line) => console.log(line), 1200);
 * budget.seen(steps, window); // says it once the first steady step is in, then never again
 * ```
 */
export class BudgetLine {
  readonly #say: (line: string) => void;
  readonly #maxTimeS: number;
  readonly #startedAt = Date.now() / 1000;
  #said = false;

  constructor(say: (line: string) => void, maxTimeS: number) {
    this.#say = say;
    this.#maxTimeS = maxTimeS;
  }

  /** The trial's steps so far: the line is said at the first call that has a steady step. */
  seen(steps: readonly StepTime[], window: WindowOptions): void {
    if (this.#said) return;
    const line = firstStepBudget({ startedAt: this.#startedAt, steps, window, maxTimeS: this.#maxTimeS });
    if (line === null) return;
    this.#said = true;
    this.#say(line);
  }
}
