/** A rate read from one line of a job's output. */
export interface ProgressRate {
  kind: "rate";
  /** Samples per second, when the line says so (`samples/s`, `ms/batch` does not). */
  samplesPerSec?: number;
  /** Steps (iterations, batches) per second: `it/s`, `s/it`, `ms/batch`. */
  stepsPerSec?: number;
  /** The step counter the line shows (`45/100`, `200/2983 batches`), when it shows one. */
  step?: number;
  /** The total the counter runs to, when shown. */
  total?: number;
  /** Which counter the line shows (its form and label, digits masked): a tqdm bar of "Epoch #:" is not the bar of "Map:". */
  counter?: string;
}

const NUMBER = String.raw`(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)`;
// tqdm (plain, Lightning's TQDMProgressBar, the Hugging Face Trainer): "45/100 [00:02<00:02, 19.80it/s, loss=0.3]"
const TQDM_COUNTER = /(?:^|[\s|])(\d+)\/(\d+|\?)\s*\[/;
const RICH_COUNTER = /(?:^|\s)(\d+)\/(\d+)\s+\d+:\d\d/;
const PER_SECOND = new RegExp(String.raw`(?:^|[\s,\[])${NUMBER}\s?(it|its|batch|batches|step|steps)\/s\b`);
const SECONDS_PER = new RegExp(String.raw`(?:^|[\s,\[])${NUMBER}\s?s\/(it|batch|step)\b`);
const SAMPLES_PER_SECOND = [
  new RegExp(String.raw`${NUMBER}\s?(?:samples?|examples?|seqs?|sequences|images?|imgs?)\s?\/\s?s(?:ec)?\b`, "i"),
  new RegExp(String.raw`(?:samples?|examples?)\s?\/\s?s(?:ec)?\s*[:=]?\s*${NUMBER}`, "i"),
  new RegExp(String.raw`(?:samples|examples)_per_s(?:ec(?:ond)?)?['"]?\s*[:=]\s*${NUMBER}`, "i"),
];
const MS_PER_BATCH = [new RegExp(String.raw`ms\/(?:batch|step|it)\s*[:=]?\s*${NUMBER}`, "i"), new RegExp(String.raw`${NUMBER}\s?ms\/(?:batch|step|it)\b`, "i")];
const BATCH_COUNTER = /(?:^|[\s|])(\d+)\s*\/\s*(\d+)\s+(?:batches|steps|iters|iterations)\b/i;
const STEP_WORD = /\b(?:step|iter|iteration|batch)\s*[:=#]?\s*(\d+)(?:\s*\/\s*(\d+))?/i;

function positive(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  return Number.isFinite(value) && value > 0 ? value : undefined;
}

const STEP_UNITS = new Set(["it", "its", "batch", "batches", "step", "steps"]);
// the unit a tqdm bar counts in, from its rate: "[00:01<00:00, 5432.10 examples/s]"
const TQDM_UNIT = /\[[^\]]*?(?:\?|\d(?:\.\d+)?)\s?([A-Za-z_]+)\/s\b/;
const COUNTER_FORMS: readonly [string, RegExp][] = [
  ["bar", TQDM_COUNTER],
  ["rich", RICH_COUNTER],
  ["batches", BATCH_COUNTER],
  ["word", STEP_WORD],
];

function counter(segment: string): { step?: number; total?: number; counter?: string } {
  for (const [form, re] of COUNTER_FORMS) {
    const match = re.exec(segment);
    if (!match) continue;
    // a bar that counts examples or tokens ("Map: 7501/7501 [..., 5432 examples/s]") counts no training steps
    const unit = form === "bar" ? TQDM_UNIT.exec(segment.slice(match.index))?.[1] : undefined;
    if (unit !== undefined && !STEP_UNITS.has(unit.toLowerCase())) return {};
    const step = Number(match[1]);
    const total = match[2] !== undefined && match[2] !== "?" ? Number(match[2]) : undefined;
    const label = (segment.slice(0, match.index).split("|")[0] ?? "")
      .replace(/\d+(?:\.\d+)?%/g, "")
      .replace(/\d+/g, "#")
      .trim();
    return { step, ...(total !== undefined ? { total } : {}), counter: `${form}:${label}` };
  }
  return {};
}

function fromPattern(segment: string, pattern: RegExp): ProgressRate | null {
  const match = pattern.exec(segment);
  if (!match) return null;
  const groups = match.groups ?? {};
  const rate: ProgressRate = { kind: "rate" };
  const samples = positive(groups.samples_per_s) ?? (Object.keys(groups).length === 0 ? positive(match[1]) : undefined);
  if (samples !== undefined) rate.samplesPerSec = samples;
  const steps =
    positive(groups.steps_per_s) ??
    (positive(groups.s_per_step) ? 1 / Number(groups.s_per_step) : undefined) ??
    (positive(groups.ms_per_step) ? 1000 / Number(groups.ms_per_step) : undefined);
  if (steps !== undefined) rate.stepsPerSec = steps;
  const step = groups.step !== undefined ? Number(groups.step) : undefined;
  if (step !== undefined && Number.isFinite(step)) rate.step = step;
  return rate.samplesPerSec !== undefined || rate.stepsPerSec !== undefined ? rate : null;
}

function parseSegment(segment: string, pattern?: RegExp): ProgressRate | null {
  if (pattern !== undefined) return fromPattern(segment, pattern);
  const rate: ProgressRate = { kind: "rate" };
  for (const re of SAMPLES_PER_SECOND) {
    const value = positive(re.exec(segment)?.[1]);
    if (value !== undefined) {
      rate.samplesPerSec = value;
      break;
    }
  }
  const perSecond = PER_SECOND.exec(segment);
  const secondsPer = SECONDS_PER.exec(segment);
  const msPer = MS_PER_BATCH.map((re) => re.exec(segment)).find((match) => match !== null);
  if (perSecond) rate.stepsPerSec = positive(perSecond[1]);
  else if (secondsPer) {
    const seconds = positive(secondsPer[1]);
    if (seconds !== undefined) rate.stepsPerSec = 1 / seconds;
  } else if (msPer) {
    const ms = positive(msPer[1]);
    if (ms !== undefined) rate.stepsPerSec = 1000 / ms;
  }
  if (rate.stepsPerSec === undefined) delete rate.stepsPerSec;
  if (rate.samplesPerSec === undefined && rate.stepsPerSec === undefined) return null;
  return { ...rate, ...counter(segment) };
}

/**
 * Reads a training rate from one line of a job's output: tqdm, Lightning and Hugging Face progress
 * bars (`it/s`, `s/it`), `ms/batch`, `samples/s`, or the user's pattern (named groups
 * `samples_per_s`, `steps_per_s`, `s_per_step`, `ms_per_step`, `step`; a pattern without named
 * groups reads samples/s from its first group). A line holding several `\r`-separated bar updates
 * is read from its last update that has a rate. Pure: no state, no I/O.
 *
 * @example
 * ```ts
 * parseProgressLine(" 45%|████▌     | 45/100 [00:02<00:02, 19.80it/s]");
 * // { kind: "rate", stepsPerSec: 19.8, step: 45, total: 100 }
 * parseProgressLine("| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.12 | loss  7.63");
 * // { kind: "rate", stepsPerSec: 22.16..., step: 200, total: 2983 }
 * parseProgressLine("loss 0.3"); // null
 * ```
 */
export function parseProgressLine(line: string, pattern?: RegExp): ProgressRate | null {
  const segments = line.split("\r");
  for (let i = segments.length - 1; i >= 0; i--) {
    const segment = segments[i] ?? "";
    if (segment.trim() === "") continue;
    const rate = parseSegment(segment, pattern);
    if (rate !== null) return rate;
  }
  return null;
}

/**
 * A user's `--progress-pattern` as a regular expression; throws a one-line cause when it is not one.
 *
 * @example
 * ```ts
 * progressPattern("(?<samples_per_s>[\\d.]+) tok/s");
 * ```
 */
export function progressPattern(source: string): RegExp {
  try {
    return new RegExp(source);
  } catch (error) {
    throw new Error(`--progress-pattern is not a regular expression: ${(error as Error).message}`);
  }
}

/** A step entry measured from progress lines (source "progress"), before the runner adds pid. */
export interface ProgressStep {
  /** when the step ended: the line's arrival, earlier by the job's own step time for the steps before the last */
  t: number;
  step: number;
  samples: number | null;
  wait_s: null;
  compute_s: number | null;
  /** training steps the entry stands for: 1, or 0 for a span of a rate without any step count */
  steps: number;
  source: "progress";
}

/** A line can stand for more steps than this only if its counter is not a step counter (samples, tokens). */
const MAX_STEPS_PER_LINE = 100_000;
/** A counter silent this long hands the count to another that goes on. */
const LEAD_QUIET_S = 10;

/**
 * Turns successive rate lines into one entry per training step they show, so that a consumer that
 * counts entries counts steps. The steps a line covers are its counter's advance over the previous
 * line (a counter falling to half or less is a new epoch; less, another stream's older view), else
 * rate × time. Each step's time is the job's own figure when the line prints one (`it/s`, `s/it`,
 * `ms/batch`): lines arrive in bursts when the job's output is buffered, so their arrival times are
 * a poor clock; without one, the time since the previous line shared among its steps. Samples per
 * step are samples/s × that time. Several lines in one chunk (the same arrival time) each count.
 * The first line's counter gives the steps before it (timed by its rate, else untimed). A line with samples/s and no way to count
 * steps gives one entry spanning the time since the previous line (`steps: 0`).
 *
 * @example
 * ```ts
 * const meter = new ProgressSteps();
 * meter.push({ kind: "rate", stepsPerSec: 100, step: 10 }, 1.0); // steps 1..10 (0.01 s each)
 * meter.push({ kind: "rate", stepsPerSec: 100, step: 12 }, 1.0); // two entries: steps 11 and 12, compute_s 0.01 each
 * meter.total; // 12
 * ```
 */
export class ProgressSteps {
  #lastT: number | null = null;
  #counters = new Map<string, { step: number; t: number }>();
  #lead: string | null = null;
  #carry = 0;
  #index = 0;
  /** Training steps counted so far. */
  total = 0;

  /** `stream` tells the job's stdout (1) from its stderr (2): a counter is followed within its own stream. */
  push(rate: ProgressRate, t: number, stream = 0): ProgressStep[] {
    const previousT = this.#lastT;
    this.#lastT = t;
    if (rate.step !== undefined) return this.#counted(rate, rate.step, t, `${stream}|${rate.counter ?? ""}`, previousT === null);
    const lead = this.#lead === null ? undefined : this.#counters.get(this.#lead);
    // the counter being followed counts the steps; a rate beside it would count them twice
    if (lead !== undefined && t - lead.t < LEAD_QUIET_S) return [];
    if (previousT === null) return [];
    const dt = Math.max(0, t - previousT);
    if (rate.stepsPerSec === undefined) {
      if (rate.samplesPerSec === undefined || !(dt > 0)) return [];
      return [{ t, step: this.#index, samples: rate.samplesPerSec * dt, wait_s: null, compute_s: dt, steps: 0, source: "progress" }];
    }
    this.#carry += rate.stepsPerSec * dt;
    const steps = Math.floor(this.#carry);
    this.#carry -= steps;
    return steps > 0 ? this.#steps(Math.min(steps, MAX_STEPS_PER_LINE), rate, t, 1 / rate.stepsPerSec) : [];
  }

  #counted(rate: ProgressRate, step: number, t: number, key: string, first: boolean): ProgressStep[] {
    const previous = this.#counters.get(key);
    // a counter a little behind its last value is an older view of the same moment; far behind, a new epoch
    const newEpoch = previous !== undefined && step < previous.step && step <= previous.step / 2;
    if (previous === undefined || step >= previous.step || newEpoch) this.#counters.set(key, { step, t });
    const lead = this.#lead === null ? undefined : this.#counters.get(this.#lead);
    // several counters in one job (a bar and a printed step, the loading bar before training, the
    // validation bar): one is followed, and another takes over only once it has gone quiet
    if (this.#lead !== key) {
      if (lead !== undefined && t - lead.t < LEAD_QUIET_S) return [];
      this.#lead = key;
    }
    const perStep = rate.stepsPerSec !== undefined ? 1 / rate.stepsPerSec : null;
    if (previous === undefined) {
      // the steps done before the first line: timed by the rate it prints, else untimed
      if (!first) return [];
      return step > 0 ? this.#steps(Math.min(step, MAX_STEPS_PER_LINE), rate, t, perStep) : [];
    }
    const steps = Math.min(step >= previous.step ? step - previous.step : newEpoch ? step : 0, MAX_STEPS_PER_LINE);
    if (steps <= 0) return [];
    const dt = Math.max(0, t - previous.t);
    return this.#steps(steps, rate, t, perStep ?? (dt > 0 ? dt / steps : null));
  }

  #steps(steps: number, rate: ProgressRate, t: number, perStep: number | null): ProgressStep[] {
    const samples = rate.samplesPerSec !== undefined && perStep !== null ? rate.samplesPerSec * perStep : null;
    const out: ProgressStep[] = [];
    for (let i = 0; i < steps; i++) {
      const back = perStep === null ? 0 : (steps - 1 - i) * perStep;
      out.push({ t: t - back, step: ++this.#index, samples, wait_s: null, compute_s: perStep, steps: 1, source: "progress" });
    }
    this.total += steps;
    return out;
  }
}
