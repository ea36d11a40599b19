/**
 * One trial of a tune: the user's command with the trial's knob values (launch.ts: config copies
 * next to the originals, removed after), run through the guard, measured over a time window
 * (window.ts) and ended from brim's side once the measurement is in, then classified: what it
 * measured, or why it measured nothing (out of memory, the cap, a crash with its cause, the time
 * limit).
 *
 * @example
 * ```ts
 * const trial = await runTrial(settings, { batch_size: 64 }, { best: 900, noise: 0.02 }, { devices, store });
 * trial.result.samplesPerSecond; trial.result.failure?.cause;
 * ```
 * @module
 */
import type { ConfigDocument } from "../configs/index.ts";
import type { Devices } from "../devices/index.ts";
import { guardRun, type GuardResult, type RunControl } from "../guard/guard.ts";
import type { LiveState } from "../guard/live.ts";
import type { ChannelMessage } from "../job/channel.ts";
import type { RunStore } from "../record/store.ts";
import { mainSteps, MODEL_SAMPLES_FIELD } from "../record/timeline/index.ts";
import { JobRates, withJobRate, type JobRate } from "./job-rate.ts";
import { trialEvaluation } from "./evaluation.ts";
import { asKnobValue, dataLimit, launchWithKnobs, loadersOf, type KnobBinding, type LoaderSeen } from "../knobs/index.ts";
import { BudgetLine } from "./trial-budget.ts";
import type { KnobValue, Knobs, TrialEnd, TrialFailure, TrialResult } from "./types.ts";
import { ENDED_TOO_SOON, NO_TRAINING_STEP } from "./types.ts";
import {
  countedSteps,
  inRateUnit,
  loaderQueueSteps,
  loaderWaveSteps,
  rateOf,
  splitWarmup,
  steadyMask,
  trialStep,
  windowVerdict,
  type StepTime,
  type WindowContext,
  type WindowOptions,
  type WindowStop,
} from "./window.ts";

/** Everything every trial of one tune shares. */
export interface TrialSettings {
  command: string[];
  cwd: string;
  tuneId: string;
  bindings: readonly KnobBinding[];
  documents: ReadonlyMap<string, ConfigDocument>;
  /** config files named in the command: where the trial copy replaces the original */
  namedInCommand: readonly { index: number; path: string; arg: string }[];
  capBytes: number;
  capScope: "gpu" | "ram";
  window: WindowOptions;
  /** the longest a trial may run, start-up included */
  timeLimitS: number;
  hz?: number;
  forwardSignals?: boolean;
  onState?: (state: LiveState, now: number) => void;
  /** trial 0 says the budget line once its first steady step is in (trial-budget.ts), against this `--max-time` */
  onNote?: (line: string) => void;
  maxTimeS?: number;
}

/** What a trial produced. */
export interface TrialOutcome {
  result: TrialResult;
  runId: string | null;
  /** knobs the job read through brim.knob, with the defaults it gave */
  knobsRead: Map<string, KnobValue>;
  /** the DataLoaders the job built (the attach's "loader" events) */
  loaders: LoaderSeen[];
}

/** What a trial is told about the others: the best so far and the noise between trials. */
export interface TrialContext {
  best: number | null;
  noise: number;
  /** an earlier trial saw the job's evaluation run: a step still running may be an evaluation pass (window.ts) */
  evaluates?: boolean;
}

/** Lines of output kept with a failed trial. */
export const TAIL_KEPT = 12;
/** The SDK's step budget for a trial: a safety net only, the window decides when a trial ends. */
const SAFETY_STEPS = 100_000;
/** Seconds a measured trial is given to stop at its next step boundary before brim ends it. */
const STOP_WAIT_S = 1.5;

/**
 * Runs one trial and classifies it (see the module doc).
 *
 * @example
 * ```ts
 * const { result } = await runTrial(settings, knobs, { best: null, noise: 0.005 }, { devices, store });
 * ```
 */
export async function runTrial(
  settings: TrialSettings,
  knobs: Knobs,
  context: TrialContext,
  deps: { devices: Devices; store: RunStore },
  index: number,
): Promise<TrialOutcome> {
  const launch = await launchWithKnobs(settings.command, settings.bindings, knobs, {
    copyTag: { kind: "trial", owner: settings.tuneId, index },
    documents: settings.documents,
    cwd: settings.cwd,
    namedInCommand: settings.namedInCommand,
  });
  try {
    const watch = new TrialWatch(settings, context, knobs, index);
    const run = await guardRun(
      {
        command: launch.command,
        cwd: settings.cwd,
        kind: "trial",
        tuneId: settings.tuneId,
        capBytes: settings.capBytes,
        shrink: false,
        knobs,
        env: Object.keys(launch.env).length > 0 ? launch.env : undefined,
        // the window ends a measured trial (a floor of steady seconds, then stable / steps / window): the
        // SDK's budget is only a safety net, large enough for fast steps to fill the floor (a job that
        // takes its step count from brim's budget must not stop at its own short default either)
        stepBudget: settings.window.warmupSteps + Math.max(SAFETY_STEPS, settings.window.maxSteps),
        warmupSteps: settings.window.warmupSteps,
        hz: settings.hz ?? 10,
        // slow is not hung: the trial's own time limit ends a trial that takes too long
        hungAfterS: null,
        timeLimitS: null,
        killGraceS: 5,
        forwardSignals: settings.forwardSignals,
        onState: settings.onState,
        onStart: (info) => watch.start(info.pid, info.control),
        onMessage: (message) => watch.message(message),
        onOutput: (_stream, line) => watch.rates.line(line, Date.now() / 1000),
        removeOnLoss: launch.copies,
      },
      deps,
    ).finally(() => watch.end());
    const knobsRead = new Map<string, KnobValue>();
    for (const entry of run.timeline.events) {
      if (entry.event !== "knob_read") continue;
      const details = entry.details as { name?: unknown; default?: unknown } | undefined;
      const value = asKnobValue(details?.default);
      if (typeof details?.name === "string" && value !== undefined && !knobsRead.has(details.name)) knobsRead.set(details.name, value);
    }
    const loaders = loadersOf(run.timeline.events);
    const result = classifyTrial(run, settings, watch.verdict, watch.timedOut, knobs, watch.stuck, watch.rates.rates);
    result.evaluation = trialEvaluation(loaders);
    // a batch larger than the data the loader sees runs no step (drop_last) or fails: say so
    const data = dataLimit(loaders, typeof knobs.batch_size === "number" ? knobs.batch_size : null);
    if (data !== null && typeof knobs.batch_size === "number" && knobs.batch_size > data.samples && (result.end === "no_steps" || result.end === "crashed")) {
      result.failure = {
        kind: "data",
        cause: `batch larger than the data: micro-batch ${knobs.batch_size} > the ${data.samples} samples the loader sees${data.sharded ? " on each rank" : ""}`,
      };
    }
    return { result, runId: run.meta.id, knobsRead, loaders };
  } finally {
    launch.cleanup();
  }
}

/** Follows a running trial's steps and ends it once the window says so, or at the time limit. */
class TrialWatch {
  verdict: { stop: WindowStop; detail: string; bound?: number; rate?: number } | null = null;
  timedOut = false;
  #ended = false;
  /** where a trial that made no step was stuck at its time limit (its stacks), when it could tell */
  stuck: { file: string | null; top: string | null } | null = null;
  /** the job's own samples-a-second lines: the samples of steps that do not say theirs */
  readonly rates = new JobRates();
  readonly #settings: TrialSettings;
  readonly #trialContext: TrialContext;
  #context: WindowContext;
  readonly #steps = new Map<number, StepTime[]>();
  #attached = false;
  #pid: number | null = null;
  #control: RunControl | null = null;
  #timer: NodeJS.Timeout | null = null;
  #limit: NodeJS.Timeout | null = null;
  #backstop: NodeJS.Timeout | null = null;

  readonly #knobs: Knobs;
  readonly #budget: BudgetLine | null;

  constructor(settings: TrialSettings, context: TrialContext, knobs: Knobs, index: number) {
    this.#knobs = knobs;
    this.#budget = index === 0 && settings.onNote !== undefined ? new BudgetLine(settings.onNote, settings.maxTimeS ?? Infinity) : null;
    this.#settings = settings;
    this.#trialContext = context;
    this.#context = { best: context.best, noise: context.noise, evaluates: context.evaluates === true };
  }

  start(pid: number, control: RunControl): void {
    this.#pid = pid;
    this.#control = control;
    this.#timer = setInterval(() => this.#check(), 250);
    this.#limit = setTimeout(() => void this.#timeLimit(), this.#settings.timeLimitS * 1000);
  }

  message(message: ChannelMessage): void {
    // the attach is in the job and saw its DataLoader: its steps will come, the printed ones must not decide
    if (message.type === "event" && message.kind === "loader") this.#attached = true;
    if (message.type !== "step") return;
    const step = trialStep(message, this.#knobs);
    this.#steps.set(message.pid, [...(this.#steps.get(message.pid) ?? []), step]);
    this.#check();
  }

  end(): void {
    this.#ended = true;
    for (const timer of [this.#timer, this.#limit, this.#backstop]) if (timer !== null) clearTimeout(timer);
  }

  /**
   * The main process's steps: the started process's when it reports, else the busiest reporter's. Steps
   * read from the job's printed progress are the last resort: none count once the attach or the SDK
   * reports steps, nor while the attach has seen the job's DataLoader and its first step is still to
   * come (the HF Trainer's bar runs ahead of the attach's first step, counted at the next one). In
   * their rate's unit: the job's own samples/s where the steps say no samples and the job prints it.
   */
  #measured(): ReturnType<typeof inRateUnit> {
    let best: StepTime[] = [];
    if (this.#pid !== null && this.#steps.has(this.#pid)) best = this.#steps.get(this.#pid) ?? [];
    else for (const steps of this.#steps.values()) if (steps.length > best.length) best = steps;
    return inRateUnit(withJobRate(countedSteps(best, this.#attached), this.rates.rates).steps);
  }

  #check(): void {
    if (this.verdict !== null || this.#control === null) return;
    const window = { ...this.#settings.window, ...loaderWindow(this.#knobs) };
    const { steps, unit } = this.#measured();
    // steps/s before the job's first rate line is not the best's unit: no trial is stopped as slower on it
    this.#budget?.seen(steps, window);
    const verdict = windowVerdict(steps, Date.now() / 1000, window, unit === "samples" ? this.#context : { ...this.#context, best: null });
    if (verdict === null) return;
    this.verdict = verdict;
    if (verdict.stop === "slower") {
      this.#control.stop(`brim tune stopped the trial early: ${verdict.detail}`, 2, true);
      return;
    }
    this.#control.requestStop(`brim tune measured enough: ${verdict.detail}`);
    // the measurement is in: a step in flight that does not end within a moment is not waited for
    this.#backstop = setTimeout(() => this.#control?.stop(`brim tune ended the trial once measured (${verdict.detail})`, 2, true), STOP_WAIT_S * 1000);
  }

  async #timeLimit(): Promise<void> {
    const control = this.#control;
    if (control === null) return;
    const steady = splitWarmup(this.#measured().steps, this.#settings.window.warmupSteps, loaderWindow(this.#knobs).queueSteps).steady;
    let where = "";
    if (this.verdict === null && steady.length >= 2) {
      this.verdict = { stop: "window", detail: `the trial time limit of ${this.#settings.timeLimitS} s (${steady.length} steps)` };
    } else {
      this.timedOut = true;
      if (this.#measured().steps.length === 0) {
        // no step at all: where it is stuck, while it is alive (a start-up that never ends, a lock)
        this.stuck = (await control.dumpStacks()).find((dump) => dump.file !== null) ?? null;
        if (this.stuck !== null) where = `; stacks in ${this.stuck.file}${this.stuck.top !== null ? ` (at ${this.stuck.top})` : ""}`;
        // the job may have ended on its own while its stacks were asked for: nothing left to stop
        if (this.#ended) return;
      }
    }
    control.stop(`brim tune ended the trial at its time limit of ${this.#settings.timeLimitS} s${where}`, 2);
  }
}

/** A trial's loader terms of its window: the workers' waves, their queue left out. */
const loaderWindow = (knobs: Knobs): { waveSteps: number; queueSteps: number } => ({
  waveSteps: loaderWaveSteps(knobs.num_workers),
  queueSteps: loaderQueueSteps(knobs.num_workers, knobs.prefetch_factor),
});

const finite = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value);

/**
 * What a guarded trial run measured, and how it ended in the tuner's terms: a trial brim stopped
 * once measured is `ok` whatever signal ended the process; `slower` when stopped as clearly slower;
 * `time_limit` when it ran out of time before two steady steps.
 *
 * @example
 * ```ts
 * classifyTrial(run, settings, { stop: "stable", detail: "..." }, false).end; // "ok"
 * ```
 */
export function classifyTrial(
  run: GuardResult,
  settings: Pick<TrialSettings, "capScope" | "window" | "timeLimitS">,
  verdict: { stop: WindowStop; detail: string; bound?: number; rate?: number } | null,
  timedOut: boolean,
  knobs: Knobs = {},
  stuck: { file: string | null; top: string | null } | null = null,
  jobRates: readonly JobRate[] = [],
): TrialResult {
  const all = mainSteps(run.timeline);
  // the printed progress is the last resort: the steps the attach or the SDK counted replace it
  const steps = all.some((step) => step.source !== "progress") ? all.filter((step) => step.source !== "progress") : all;
  // steps brim counted are never thrown away: with no samples, the job's own samples/s, else their batches or the steps themselves are the rate
  const ownRate = withJobRate(
    steps.map((step) => trialStep(step, knobs)),
    jobRates,
  );
  const { steps: times, unit } = inRateUnit(ownRate.steps);
  const { queueSteps } = loaderWindow(knobs);
  const { warmup, steady } = splitWarmup(times, settings.window.warmupSteps, queueSteps);
  const mask = steadyMask(times, queueSteps);
  const steadyEntries = steps.filter((_, i) => mask[i]);
  const summary = run.summary;
  const recorded = run.meta.end?.cause ?? "crashed";
  // a trial whose guard or store failed counts as crashed for the search
  const cause = recorded === "store_failed" || recorded === "supervisor_lost" ? "crashed" : recorded;
  const measuredByBrim = verdict !== null && steady.length >= (verdict.stop === "window" ? 1 : 2);
  let end: TrialEnd;
  if (cause === "interrupted") end = "interrupted";
  else if (verdict?.stop === "slower") end = "slower";
  // how the process ended after brim asked it to stop does not matter, unless it ran out of memory
  else if (measuredByBrim && (cause === "ok" || cause === "hung" || cause === "crashed")) end = "ok";
  else if (timedOut) end = "time_limit";
  else if (cause === "ok") end = steady.length === 0 ? "no_steps" : "ok";
  else end = cause;
  const waits = steadyEntries.map((s) => (finite(s.wait_s) ? s.wait_s : 0));
  const busy = steady.reduce((a, s) => a + s.seconds, 0);
  const start = run.timeline.start;
  const first = times[0];
  const fixedCostS = start !== null && first !== undefined ? Math.max(0, first.t - first.seconds - start.t) : null;
  const samples = (unit === "samples" && !ownRate.fromJob ? steady : [])
    .map((s) => s.samples)
    .filter(finite)
    .sort((a, b) => a - b);
  const precision = [...steps].reverse().find((step) => step.precision !== null)?.precision;
  const medianOf = (values: (number | null)[]): number | null => {
    const sorted = values.filter(finite).sort((a, b) => a - b);
    return sorted.length > 0 ? (sorted[Math.floor(sorted.length / 2)] as number) : null;
  };
  const result: TrialResult = {
    end,
    // a trial stopped as slower keeps what it measured, or the bound that stopped it: an upper bound
    // stopped as slower: the numbers the stop was decided on (steps the job sent after it do not count)
    samplesPerSecond: end === "ok" ? rateOf(steady) : end === "slower" ? (verdict?.rate ?? verdict?.bound ?? rateOf(steady)) : null,
    rateIsBound: end === "slower" && verdict?.rate === undefined && verdict?.bound !== undefined,
    ...(unit === "samples" ? {} : { rateUnit: unit }),
    ...(ownRate.fromJob ? { rateFrom: "job" as const } : {}),
    stepSeconds: steady.map((s) => s.seconds),
    peakBytes: settings.capScope === "gpu" ? summary.peak_tree_gpu_bytes : summary.peak_tree_rss_bytes,
    frameworkPeakBytes: summary.framework_peak_allocated_bytes,
    durationS: summary.duration_s,
    oomRecoveries: summary.oom_recoveries,
    gpuUtilMean: summary.gpu_util_mean,
    smActivityMean: summary.sm_activity_mean,
    dataWaitShare: busy > 0 ? waits.reduce((a, b) => a + b, 0) / busy : summary.data_wait_share,
    fixedCostS,
    measuredS: busy > 0 ? busy : null,
    stoppedBy: verdict?.stop ?? null,
    samplesPerStep: samples.length > 0 ? samples[Math.floor(samples.length / 2)] : null,
    samplesPerStepMax: samples.length > 0 ? samples[samples.length - 1] : null,
    warmupSteps: warmup,
    firstStepS: first?.seconds ?? null,
    precision: typeof precision === "string" ? precision : null,
    samplesFromKnob:
      unit === "samples" &&
      !ownRate.fromJob &&
      steady.length > 0 &&
      steadyEntries.every((step) => !finite(step.samples)) &&
      steady.some((step) => step.samples !== null),
    cpuCores: finite(run.timeline.measured.tree_cpu_percent_mean) ? run.timeline.measured.tree_cpu_percent_mean / 100 : null,
    cpus: run.meta.device.host.cpus,
    hostBusy: finite(run.timeline.measured.host_cpu_percent_mean) ? run.timeline.measured.host_cpu_percent_mean / 100 : null,
    accumulation: medianOf(steadyEntries.map((s) => s.accumulation)),
    microBatch: medianOf(steadyEntries.map((s) => s.micro_batch)),
    // read in a few of the first steps only (warm-up ones among them): every step that carried it
    modelSamplesPerStep: medianOf(steps.map((s) => s.metrics?.[MODEL_SAMPLES_FIELD] ?? null)),
    failure: null,
  };
  if (end === "ok" && result.samplesPerSecond === null) result.end = "no_steps";
  if (result.end !== "ok") {
    result.failure = failureOf(
      result.end,
      run,
      verdict,
      settings.timeLimitS,
      steps.length === 0 ? stuck : null,
      steps.length,
      times.filter((t) => t.samples !== null).length,
    );
    if (result.end !== "slower" && result.end !== "interrupted") result.tail = lastLines(run.job.tail, TAIL_KEPT);
  }
  return result;
}

/**
 * The failure of a trial that gave no throughput, in one line.
 *
 * @example
 * ```ts
 * failureOf("crashed", run, null, 120); // { kind: "crash", cause: "ValueError: batch_size 4096 is larger than the dataset (3000)" }
 * ```
 */
export function failureOf(
  end: TrialEnd,
  run: Pick<GuardResult, "meta" | "job">,
  verdict: { detail: string } | null,
  timeLimitS: number,
  stuck: { file: string | null; top: string | null } | null = null,
  steps: number | null = null,
  withSamples: number | null = null,
): TrialFailure {
  const message = run.meta.end?.message ?? "";
  switch (end) {
    case "gpu_oom":
    case "host_oom":
      return { kind: "memory", cause: errorLine(run.job.tail) ?? message };
    case "cap_exceeded":
      return { kind: "cap", cause: message.split(";")[0] ?? message };
    case "time_limit":
      if (steps === 0)
        return {
          kind: "time_limit",
          cause: `no training step within the trial time limit of ${timeLimitS} s${
            stuck?.file != null ? `; stuck at ${stuck.top ?? "?"} (every thread's stack: ${stuck.file})` : ""
          } (raise --trial-time if its start-up takes this long)`,
        };
      return {
        kind: "time_limit",
        cause: `no two steady steps within the trial time limit of ${timeLimitS} s (slow, not out of memory; raise --trial-time to measure it)`,
      };
    case "slower":
      return { kind: "slower", cause: verdict?.detail ?? "clearly slower than the best so far" };
    case "hung":
      return { kind: "hung", cause: message };
    case "interrupted":
      return { kind: "interrupted", cause: "interrupted" };
    case "no_steps":
      // every step had its samples, there were just too few: the job ends on its own too soon
      if (steps !== null && steps > 0 && withSamples === steps)
        return {
          kind: "no_steps",
          cause: `${ENDED_TOO_SOON} after ${steps} step${steps === 1 ? "" : "s"}: too few to measure (the first are warm-up, then two steady steps at least); let it run longer (more batches or epochs)`,
        };
      if (steps === 0)
        return { kind: "no_steps", cause: `${NO_TRAINING_STEP}: a trial counts only once the job trains (is the loop instrumented, or its progress printed?)` };
      return { kind: "no_steps", cause: "the job ran but reported no steady step with samples (is the loop instrumented, or its progress printed?)" };
    case "gpu_fault":
      return { kind: "gpu_fault", cause: message };
    default:
      return { kind: "crash", cause: errorLine(run.job.tail) ?? message };
  }
}

/** The line of the output that names the error: the last "SomethingError: …" line, else the last non-empty one. */
function errorLine(tail: readonly string[]): string | null {
  const lines = tail.map((line) => line.trim()).filter((line) => line !== "");
  const error = [...lines].reverse().find((line) => /^([\w.]+(Error|Exception|Interrupt)|RuntimeError|SystemExit)\b|^[\w.]+: .*(error|Error)/.test(line));
  const chosen = error ?? lines[lines.length - 1] ?? null;
  return chosen === null ? null : chosen.length > 200 ? `${chosen.slice(0, 197)}...` : chosen;
}

function lastLines(tail: readonly string[], n: number): string[] {
  const lines = [...tail];
  while (lines.length > 0 && (lines[lines.length - 1] ?? "").trim() === "") lines.pop();
  return lines.slice(-n);
}
