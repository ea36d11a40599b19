/**
 * The job's own rate lines as a trial's evidence. Where brim counts a job's steps but none says its
 * samples (the batch dimension not found, no batch-size knob), a job that prints its own samples a
 * second (`samples/s`, `images/s`, or a column `--progress-pattern` names `samples_per_s`: an
 * environment's frames a second) gives each counted step its samples: the rate the job printed for
 * the span the step lies in, times the step's seconds. The trial then compares samples/s, the job's
 * own, where steps/s would hold only while a knob leaves the samples of a step alone.
 *
 * @module
 */
import { parseProgressLine, progressPattern } from "../job/progress-lines.ts";
import type { StepTime } from "./window.ts";

const MAX_LINE = 4096;

/** One rate line of the job's output: its samples a second, and when brim read it (seconds). */
export interface JobRate {
  t: number;
  samplesPerSec: number;
}

/**
 * Collects the samples-a-second lines of a job's output as they come.
 *
 * @example
 * ```ts
 * const rates = new JobRates();
 * rates.line("epoch 1 | 812.5 samples/s", 100.2);
 * rates.rates; // [{ t: 100.2, samplesPerSec: 812.5 }]
 * ```
 */
export class JobRates {
  readonly rates: JobRate[] = [];
  readonly #pattern: RegExp | undefined;

  /** `pattern`: the user's --progress-pattern (BRIM_PROGRESS_PATTERN), whose `samples_per_s` group is the job's rate. */
  constructor(pattern: string | undefined = process.env.BRIM_PROGRESS_PATTERN) {
    let compiled: RegExp | undefined;
    try {
      compiled = pattern === undefined || pattern === "" ? undefined : progressPattern(pattern);
    } catch {
      compiled = undefined; // the run itself refuses a bad pattern with its cause
    }
    this.#pattern = compiled;
  }

  line(text: string, t: number): void {
    if (text.length > MAX_LINE) return; // a dump, not a rate line (the runner skips these too)
    const rate = parseProgressLine(text, this.#pattern);
    if (rate?.samplesPerSec !== undefined) this.rates.push({ t, samplesPerSec: rate.samplesPerSec });
  }
}

/**
 * The steps with the samples the job's own rate gives them, where no step says its samples and the
 * job printed a rate: each step takes the first rate line at or after its end (the line that covers
 * it), steps after the last line that line's rate. `fromJob` says whether the job's rate was used.
 *
 * @example
 * ```ts
 * withJobRate([{ t: 10, samples: null, seconds: 0.5, warmup: false }], [{ t: 11, samplesPerSec: 64 }]).steps[0]?.samples; // 32
 * ```
 */
export function withJobRate(steps: readonly StepTime[], rates: readonly JobRate[]): { steps: StepTime[]; fromJob: boolean } {
  const sorted = [...rates].sort((a, b) => a.t - b.t);
  const last = sorted.at(-1);
  if (last === undefined || steps.length === 0 || steps.some((s) => s.samples !== null && s.samples > 0)) return { steps: [...steps], fromJob: false };
  return { steps: steps.map((s) => ({ ...s, samples: (sorted.find((r) => r.t >= s.t) ?? last).samplesPerSec * s.seconds })), fromJob: true };
}
