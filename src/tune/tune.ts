/**
 * `brim tune`: the order of a tune. Bindings (bindings.ts) say how knobs reach the job, the space
 * (space.ts) what may change, trials (trial.ts) run and measure one configuration each, the search
 * (search.ts, strategies/) picks the next, and the record (record.ts) keeps all of it.
 *
 * @example
 * ```ts
 * const result = await tune({ command: ["python", "train.py", "--config", "config.yaml"], cwd, maxTrials: 12, maxTimeS: 600,
 *   warmupSteps: 1, measureSteps: 20, trialTimeLimitS: 120 }, { devices: openDevices(), store });
 * ```
 * @module
 */
import { dirname } from "node:path";
import { removeStaleTrialCopies, type ConfigDocument } from "../configs/index.ts";
import type { Devices } from "../devices/index.ts";
import { UsageError } from "../errors/index.ts";
import type { LiveState } from "../guard/live.ts";
import { formatBytes } from "../bytes.ts";
import { mean } from "../stats.ts";
import { newRecordId, type RunStore } from "../record/store.ts";
import type { TuneRecord } from "../record/types.ts";
import { rewriteArgv } from "./argv.ts";
import { describeBindings, resolveBindings } from "./bindings.ts";
import { configBaseline, configFilesInCommand, fillTemplate, KNOWN_KNOBS, type KnobBinding } from "./knobs.ts";
import { bindingRecord, noWinnerAdvice, recordTrial, trialRecord } from "./record.ts";
import { doublingBisection, exhaustiveGrid, searchKnobs } from "./search.ts";
import { buildSpace, contextOfDevices, defaultCap, effectiveBatchPolicy, MICRO_BATCH_KNOB } from "./space.ts";
import { planPrior } from "./plan-prior.ts";
import { CONFIRM_PAIRS, CONFIRM_PAIRS_MAX, confirmationOutcome, confirmWinner, type Confirmation } from "./confirm.ts";
import { samplesMismatch, winnerPolicy } from "./effective.ts";
import { evidenceOf, loaderBound, stillLimits } from "./evidence.ts";
import { codeValues, dataLimit, scriptLiteral, type LoaderSeen } from "./loaders.ts";
import { knobsKey } from "./strategies/axis.ts";
import { trialNoise, withinTrialNoise } from "./strategies/noise.ts";
import { runTrial, type TrialContext, type TrialSettings } from "./trial.ts";
import type { KnobValue, Knobs, SearchOutcome, StopReason, TrialResult } from "./types.ts";

export { resolveBindings } from "./bindings.ts";
export { samplesMismatch, SAMPLES_TOLERANCE } from "./effective.ts";
export { ACCUMULATION_KNOB, buildSpace, MICRO_BATCH_KNOB } from "./space.ts";
export { configBaseline, configFilesInCommand, fillTemplate, parseBinding, templateKnobs, type KnobBinding } from "./knobs.ts";
export { rewriteArgv } from "./argv.ts";
export { describeBindings } from "./bindings.ts";

/** Everything `brim tune` is asked. */
export interface TuneOptions {
  command: string[];
  cwd: string;
  /** Cap of the process tree (GPU, or RAM in CPU mode); default 90 % of the GPU, or half the available RAM. */
  capBytes?: number;
  effectiveBatch?: number;
  /** Let the effective batch change with the micro-batch (otherwise a baseline accumulation > 1 holds it). */
  freeBatch?: boolean;
  bindings?: KnobBinding[];
  /** `--knob name=v1,v2`: the values to try (one value: the baseline of a template knob). */
  knobValues?: Record<string, KnobValue[]>;
  /** Knobs not to tune. */
  fixed?: string[];
  maxTrials: number;
  maxTimeS: number;
  /** steps always left out of a trial's measurement (more are found in the step times) */
  warmupSteps: number;
  /** measured steps per trial at most */
  measureSteps: number;
  /** seconds of measured steps per trial at most (default 10) */
  windowS?: number;
  /** a trial stops once its throughput is stable within this share (default 0.02) */
  stableWithin?: number;
  trialTimeLimitS: number;
  maxMicroBatch?: number;
  /**
   * The search: brim's (default); `doubling-bisection`, the classic finder (largest micro-batch that
   * runs, nothing else tuned); `grid`, every micro-batch of `knobValues.batch_size` (default powers of
   * two) under every combination of the other knobs. The last two exist to compare against.
   */
  strategy?: TuneStrategy;
  hz?: number;
  forwardSignals?: boolean;
  /** Aborted (Ctrl-C between trials): no further trial starts; what was measured is kept. */
  abortSignal?: AbortSignal;
  onTrialStart?: (event: TrialProgress) => void;
  onTrialEnd?: (event: TrialProgress & { result: TrialResult; runId: string | null }) => void;
  onState?: (state: LiveState, now: number) => void;
  onNote?: (line: string) => void;
}

/** The search strategies `brim tune --strategy` offers. */
export const TUNE_STRATEGIES = ["brim", "doubling-bisection", "grid"] as const;
/** One of {@link TUNE_STRATEGIES}. */
export type TuneStrategy = (typeof TUNE_STRATEGIES)[number];

/** Progress of a tune, for the live view. */
export interface TrialProgress {
  index: number;
  knobs: Knobs;
  purpose: string;
  bestIndex: number | null;
  /** the trial budget stated up front: it does not change during the tune */
  plannedTotal: number;
}

/** What `brim tune` produced. */
export interface TuneResult {
  record: TuneRecord;
  outcome: SearchOutcome | null;
  bindings: KnobBinding[];
  /** The command with the winner's template knobs filled in. */
  winnerCommand: string[] | null;
}

/** Dependencies passed in. */
export interface TuneDeps {
  devices: Devices;
  store: RunStore;
  now?: () => number;
}

/** Seconds of steady steps a trial measures at most, by default. */
export const DEFAULT_WINDOW_S = 10;
/** A trial stops once its throughput is stable within this share, by default. */
export const DEFAULT_STABLE_WITHIN = 0.02;

/**
 * `brim tune`: runs the user's job on short trials through the guard and searches for the fastest
 * knob values that fit the cap. Trial 0 is the user's configuration as it is. The tune and each trial
 * land in the run store; the user's files are not touched (trial values go to temporary copies of
 * the config next to it, removed after each trial).
 *
 * @example
 * ```ts
 * const result = await tune({ command: ["python", "train.py", "--config", "config.yaml"], cwd, maxTrials: 12, maxTimeS: 600,
 *   warmupSteps: 1, measureSteps: 20, trialTimeLimitS: 120 }, { devices: openDevices(), store });
 * console.log(result.record.winner);
 * ```
 */
export async function tune(options: TuneOptions, deps: TuneDeps): Promise<TuneResult> {
  if (options.command.length === 0) throw new UsageError("no command to tune: put it after --, e.g. brim tune -- python train.py --config config.yaml");
  const now = deps.now ?? ((): number => Date.now() / 1000);
  const note = (line: string): void => options.onNote?.(line);
  const { bindings, documents, notes: bindingNotes } = await resolveBindings(options.command, options.cwd, options.bindings ?? []);
  // A tune killed before it could clean up left trial copies beside the user's config: gone now.
  for (const file of new Set(bindings.flatMap((b) => (b.via === "config" ? [b.file] : [])))) {
    const removed = await removeStaleTrialCopies(file, deps.store);
    if (removed.length > 0) note(`removed ${removed.length} trial cop${removed.length === 1 ? "y" : "ies"} of ${file} that an interrupted tune left`);
  }
  bindingNotes.unshift(describeBindings(bindings, documents, options.cwd));
  bindingNotes.forEach(note);
  const cap =
    options.capBytes !== undefined
      ? { capBytes: options.capBytes, scope: deps.devices.inventory().backend === "cpu" ? ("ram" as const) : ("gpu" as const), why: "--cap" }
      : defaultCap(deps.devices);
  note(`cap ${formatBytes(cap.capBytes)} ${cap.scope === "gpu" ? "GPU" : "RAM"}: ${cap.why}`);

  const baseline: Knobs = configBaseline(bindings, documents);
  for (const [knob, values] of Object.entries(options.knobValues ?? {})) {
    if (baseline[knob] === undefined && values[0] !== undefined) baseline[knob] = values[0];
  }
  const windowS = options.windowS ?? DEFAULT_WINDOW_S;
  const stableWithin = options.stableWithin ?? DEFAULT_STABLE_WITHIN;
  note(
    `budget: ${options.maxTrials} trials or ${Math.round(options.maxTimeS)} s, whichever ends first, then ${2 * CONFIRM_PAIRS} (up to ${2 * CONFIRM_PAIRS_MAX}) to confirm a winner against your configuration; each trial leaves out its warm-up, ` +
      `then measures until throughput is stable within ±${(stableWithin * 100).toFixed(0)} %, ${options.measureSteps} steps or ${windowS} s, and stops early when clearly slower than the best`,
  );
  const id = newRecordId();
  const record: TuneRecord = {
    schema: "brim.tune/v1",
    id,
    command: options.command,
    cwd: options.cwd,
    bindings: bindings.map((binding) => bindingRecord(binding, documents)),
    cap_bytes: cap.capBytes,
    cap_scope: cap.scope,
    effective_batch: options.effectiveBatch ?? null,
    started_at: new Date().toISOString(),
    ended_at: null,
    trials: [],
    winner: null,
    stop_reason: null,
    strategy: options.strategy ?? "brim",
    memory_line: null,
    notes: [...bindingNotes],
    budget: { max_trials: options.maxTrials, max_time_s: options.maxTimeS },
  };
  await deps.store.writeTune(record);
  const settings: TrialSettings = {
    command: options.command,
    cwd: options.cwd,
    tuneId: id,
    bindings,
    documents,
    namedInCommand: configFilesInCommand(options.command, options.cwd),
    capBytes: cap.capBytes,
    capScope: cap.scope,
    window: { warmupSteps: options.warmupSteps, maxSteps: options.measureSteps, minSteps: 3, windowS, stableWithin },
    timeLimitS: options.trialTimeLimitS,
    hz: options.hz,
    forwardSignals: options.forwardSignals,
    onState: options.onState,
  };
  try {
    return await runTune(options, deps, { record, bindings, documents, baseline, settings, note, now, tuneStartedAt: now(), codeHints: [] });
  } finally {
    // an error or Ctrl-C mid-tune still leaves a finished record of what was measured
    if (record.ended_at === null) {
      record.ended_at = new Date().toISOString();
      record.stop_reason ??= options.abortSignal?.aborted === true ? "interrupted" : "error";
      await deps.store.writeTune(record);
    }
  }
}

interface TuneState {
  record: TuneRecord;
  bindings: KnobBinding[];
  documents: Map<string, ConfigDocument>;
  baseline: Knobs;
  settings: TrialSettings;
  note: (line: string) => void;
  now: () => number;
  tuneStartedAt: number;
  /** values written in the job's code that no knob reaches, with the file:line to change */
  codeHints: string[];
}

async function runTune(options: TuneOptions, deps: TuneDeps, state: TuneState): Promise<TuneResult> {
  const { record, bindings, baseline, settings, note, now, tuneStartedAt } = state;
  for (const binding of bindings) {
    if (binding.via === "config" && !settings.namedInCommand.some((entry) => entry.path === binding.file)) {
      note(
        `${binding.file} is not named in the command: trials pass ${binding.knob} through the environment only (brim.knob), and apply writes it to the file`,
      );
    }
  }
  // the counter's total during the search: its budget (the confirmation counts its own trials)
  const planned = options.maxTrials;
  let interrupted = false;
  let untrusted: string | null = null;
  const measured: { knobs: Knobs; result: TrialResult }[] = [];
  const best = (): number | null => {
    const rates = measured.filter((m) => m.result.end === "ok" && m.result.oomRecoveries === 0).map((m) => m.result.samplesPerSecond ?? 0);
    return rates.length > 0 ? Math.max(...rates) : null;
  };
  const trial = async (
    knobs: Knobs,
    index: number,
  ): Promise<{ result: TrialResult; runId: string | null; knobsRead: Map<string, KnobValue>; loaders: LoaderSeen[] }> => {
    if (interrupted || options.abortSignal?.aborted === true) return { result: interruptedResult(), runId: null, knobsRead: new Map(), loaders: [] };
    // a configuration measured before is being re-measured: it runs to the end of its window
    const again = measured.some((m) => knobsKey(m.knobs) === knobsKey(knobs));
    const outcome = await runTrial(
      settings,
      knobs,
      again ? { ...trialContext(measured, null) } : index === 0 ? { best: null, noise: DEFAULT_STABLE_WITHIN } : trialContext(measured, best()),
      deps,
      index,
    );
    if (outcome.result.end === "interrupted") interrupted = true;
    const first = measured[0];
    measured.push({ knobs, result: outcome.result });
    if (first !== undefined && untrusted === null) {
      untrusted = samplesMismatch(first, { knobs, result: outcome.result });
      if (untrusted !== null) note(untrusted);
    }
    return outcome;
  };

  note('trial 0 runs your configuration as it is (the "before")');
  options.onTrialStart?.({ index: 0, knobs: baseline, purpose: "baseline", bestIndex: null, plannedTotal: planned });
  const first = await trial(baseline, 0);
  options.onTrialEnd?.({ index: 0, knobs: baseline, purpose: "baseline", bestIndex: null, plannedTotal: planned, result: first.result, runId: first.runId });
  await recordTrial(record, deps.store, 0, baseline, "baseline", first.result, first.runId);
  if (first.result.end !== "ok" && first.result.failure?.kind !== "memory" && first.result.failure?.kind !== "cap" && first.result.oomRecoveries === 0) {
    // a job that does not run as configured for another reason than memory cannot be tuned
    return finish(options, deps, state, null, first.result.end === "interrupted" ? "interrupted" : "converged");
  }

  // Knobs the job read through brim.knob join the baseline when brim knows how to tune them or the user named them.
  for (const [knob, value] of first.knobsRead) {
    if (baseline[knob] === undefined && (knob in KNOWN_KNOBS || options.knobValues?.[knob] !== undefined)) baseline[knob] = value;
  }
  const context = { ...contextOfDevices(deps.devices), loader: loaderBound(evidenceOf(first.result, baseline, settings.capBytes)) };
  // values written in the code: the file:line to change, said now and at the end
  state.codeHints = codeValues(first.loaders.length > 0 ? first.loaders : scriptLiteral(options.command, settings.cwd), baseline);
  state.codeHints.forEach(note);
  const data = dataLimit(first.loaders, typeof baseline[MICRO_BATCH_KNOB] === "number" ? baseline[MICRO_BATCH_KNOB] : null);
  if (data !== null && baseline[MICRO_BATCH_KNOB] !== undefined)
    note(
      `micro-batch at most ${data.samples}: the samples the loader${data.where === null ? "" : ` at ${data.where}`} sees${data.sharded ? " on each rank" : ""}`,
    );
  const maxMicroBatch = data === null ? options.maxMicroBatch : Math.min(options.maxMicroBatch ?? Infinity, data.samples);
  const space = buildSpace(
    baseline,
    {
      ...options,
      maxMicroBatch,
      observedAccumulation: first.result.accumulation ?? undefined,
      precisionSwitch: bindings.some((b) => b.via === "argv" && b.knob === "precision"),
    },
    [...bindings.map((b) => b.knob), ...first.knobsRead.keys(), ...Object.keys(options.knobValues ?? {})],
    context,
    note,
  );
  if (space.microBatch === undefined && space.others.length === 0) {
    // nothing to vary: trial 0 is all there is, and it is not a winner
    return finish(options, deps, state, null, "nothing_to_tune");
  }
  record.effective_batch = space.effectiveBatch ?? null;
  const policy = effectiveBatchPolicy(space, options);
  record.effective_batch_policy = { kind: policy.kind, before: policy.value, after: null, text: policy.text };
  const configFile = settings.namedInCommand[0]?.path;
  const inventory = deps.devices.inventory();
  const prior =
    configFile === undefined
      ? null
      : await planPrior(state.documents.get(configFile)?.data, dirname(configFile), inventory, settings.capBytes, baseline.precision);
  if (prior !== null)
    note(
      `the plan seeds the first memory probe: ${prior.source} gives ${formatBytes(prior.bytesPerSample)} per sample over ${formatBytes(prior.fixedBytes)}, largest micro-batch ${prior.maxMicroBatch ?? "?"}`,
    );
  const runIds = new Map<number, string | null>([[0, first.runId]]);
  let searchIndex = 0;
  const strategy = options.strategy ?? "brim";
  const search: typeof searchKnobs =
    strategy === "doubling-bisection"
      ? doublingBisection
      : strategy === "grid"
        ? (gridSpace, runner, searchOptions) =>
            exhaustiveGrid(gridSpace, runner, {
              ...searchOptions,
              microBatches: (options.knobValues?.[MICRO_BATCH_KNOB] ?? [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]).filter(
                (value): value is number => typeof value === "number",
              ),
            })
        : searchKnobs;
  if (strategy !== "brim") note(`search strategy: ${strategy} (for comparison with brim's own)`);
  const outcome = await search(
    space,
    {
      run: async (knobs, purpose) => {
        const index = searchIndex++;
        // The search's first trial is the baseline by contract: trial 0 already ran it.
        if (index === 0) return first.result;
        const { result, runId } = await trial(knobs, index);
        runIds.set(index, runId);
        await recordTrial(record, deps.store, index, knobs, purpose, result, runId);
        return result;
      },
    },
    {
      capBytes: settings.capBytes,
      ...(prior !== null
        ? {
            prior: {
              fixedBytes: prior.fixedBytes,
              bytesPerSample: prior.bytesPerSample,
              ...(prior.maxMicroBatch !== undefined ? { maxMicroBatch: prior.maxMicroBatch } : {}),
            },
          }
        : {}),
      maxTrials: options.maxTrials,
      maxStepS: settings.window.windowS,
      maxTimeS: Math.max(1, options.maxTimeS - (now() - tuneStartedAt)),
      now,
      stopWhen: () => (untrusted !== null ? "untrusted" : null),
      onTrial: (event) => {
        if (event.index === 0) return;
        const progress = { ...event, plannedTotal: planned };
        if (event.result === undefined) options.onTrialStart?.(progress);
        else options.onTrialEnd?.({ ...progress, result: event.result, runId: runIds.get(event.index) ?? null });
      },
    },
  );
  record.trials = outcome.trials.map((t) => trialRecord(t.index, t.knobs, t.purpose, t.result, runIds.get(t.index) ?? null));
  const baselineKnobs = outcome.trials[0]?.knobs ?? baseline;
  const winnerKnobs = untrusted === null && outcome.stopReason !== "untrusted" ? outcome.best?.knobs : undefined;
  let confirmation: Confirmation | null = null;
  if (winnerKnobs !== undefined && knobsKey(winnerKnobs) !== knobsKey(baselineKnobs)) {
    // the speedup printed is the one measured interleaved, A/B/A/B, never the search's own
    const firstConfirm = Math.max(...outcome.trials.map((t) => t.index)) + 1;
    let next = firstConfirm;
    const durations: number[] = [];
    const repeats = new Map<string, number[]>();
    for (const t of outcome.trials) {
      if (t.result.end !== "ok" || t.result.samplesPerSecond === null) continue;
      repeats.set(knobsKey(t.knobs), [...(repeats.get(knobsKey(t.knobs)) ?? []), t.result.samplesPerSecond]);
    }
    const within = outcome.trials.map((t) => withinTrialNoise(t.result.stepSeconds)).filter((v): v is number => v !== null);
    note(`confirming the winner: it and your configuration are measured again, interleaved (A/B/A/B), for the speedup and its interval`);
    confirmation = await confirmWinner(
      baselineKnobs,
      winnerKnobs,
      async (knobs, purpose) => {
        const index = next++;
        const pairs = Math.max(CONFIRM_PAIRS, Math.ceil((index - firstConfirm + 1) / 2));
        const progress = { index, knobs, purpose, bestIndex: outcome.bestIndex, plannedTotal: firstConfirm + 2 * pairs };
        options.onTrialStart?.(progress);
        const { result, runId } = await trial(knobs, index);
        durations.push(result.durationS);
        options.onTrialEnd?.({ ...progress, result, runId });
        await recordTrial(record, deps.store, index, knobs, purpose, result, runId);
        return result;
      },
      [...repeats.values()],
      trialNoise(within, []),
      () => now() - tuneStartedAt + 2 * Math.max(...durations, 0) <= options.maxTimeS,
    );
  }
  return finish(options, deps, state, outcome, interrupted ? "interrupted" : outcome.stopReason, confirmation);
}

async function finish(
  options: TuneOptions,
  deps: TuneDeps,
  state: TuneState,
  outcome: SearchOutcome | null,
  stopReason: StopReason | "nothing_to_tune",
  confirmation: Confirmation | null = null,
): Promise<TuneResult> {
  const { record } = state;
  const trials = outcome?.trials ?? [];
  // the "before" is the mean of every measurement of the baseline configuration, as the winner's is
  const baselineKey = knobsKey(trials[0]?.knobs ?? state.baseline);
  const baselineRates = trials
    .filter((t) => knobsKey(t.knobs) === baselineKey && t.result.end === "ok" && t.result.samplesPerSecond !== null)
    .map((t) => t.result.samplesPerSecond as number);
  const baselineRate = mean(baselineRates);
  const trusted = stopReason !== "untrusted" && stopReason !== "nothing_to_tune";
  const best = trusted && outcome !== null && outcome.bestIndex !== null ? outcome.trials[outcome.bestIndex] : undefined;
  const bestRate = outcome?.best?.samplesPerSecond ?? best?.result.samplesPerSecond ?? null;
  record.winner = best
    ? { index: best.index, knobs: outcome?.best?.knobs ?? best.knobs, speedup: baselineRate && bestRate ? bestRate / baselineRate : null }
    : null;
  record.stop_reason = stopReason;
  const noGain = confirmationOutcome(record, confirmation, outcome?.noise ?? null);
  if (noGain !== null) {
    record.confirmation = noGain.confirmation;
    record.winner = noGain.winner;
  }
  if (outcome !== null) {
    record.noise = outcome.noise;
    record.memory_line = outcome.memoryLine
      ? {
          intercept_bytes: outcome.memoryLine.interceptBytes,
          bytes_per_sample: outcome.memoryLine.bytesPerSample,
          margin_bytes: outcome.memoryLine.marginBytes,
          predicted_max_micro_batch: outcome.memoryLine.predictedMaxMicroBatch,
        }
      : null;
    record.notes = [...record.notes, ...outcome.notes];
  }
  const policy = record.effective_batch_policy;
  if (policy !== undefined && record.winner !== null) Object.assign(policy, winnerPolicy(policy, record.winner.knobs, best?.result));
  const ending = record.winner !== null ? trials.find((t) => t.index === record.winner?.index) : trials[0];
  if (ending !== undefined && ending.result.end === "ok") record.limits = stillLimits(evidenceOf(ending.result, ending.knobs, record.cap_bytes), ending.knobs);
  if (state.codeHints.length > 0) record.limits = [...(record.limits ?? []), ...state.codeHints];
  record.no_winner =
    record.winner === null && stopReason !== "interrupted"
      ? (noGain?.advice ?? noWinnerAdvice(record.trials, stopReason, formatBytes(record.cap_bytes)))
      : null;
  record.ended_at = new Date().toISOString();
  await deps.store.writeTune(record);
  const argv = state.bindings.filter((binding) => binding.via === "argv");
  const winnerCommand = record.winner ? rewriteArgv(fillTemplate(options.command, record.winner.knobs), argv, record.winner.knobs) : null;
  return { record, outcome, bindings: state.bindings, winnerCommand };
}

/** The best so far, and the noise between trials: the within-trial errors and the spread of repeated configurations (see window.ts). */
function trialContext(measured: readonly { knobs: Knobs; result: TrialResult }[], best: number | null): TrialContext {
  const ok = measured.filter((m) => m.result.end === "ok" && m.result.stepSeconds.length > 0 && m.result.samplesPerSecond !== null);
  const within = ok.map((m) => withinTrialNoise(m.result.stepSeconds)).filter((v): v is number => v !== null);
  const repeats = new Map<string, number[]>();
  for (const m of ok) repeats.set(knobsKey(m.knobs), [...(repeats.get(knobsKey(m.knobs)) ?? []), m.result.samplesPerSecond as number]);
  return { best, noise: Math.max(DEFAULT_STABLE_WITHIN, trialNoise(within, [...repeats.values()])) };
}

function interruptedResult(): TrialResult {
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
