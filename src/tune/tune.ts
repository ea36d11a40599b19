/**
 * `brim tune`: the order of a tune. Bindings (src/knobs/) say how knobs reach the job, trial 0
 * (discover.ts) what the job's code holds, the space (space.ts) what may change, trials (trial.ts)
 * run and measure one configuration each, the search (search.ts, strategies/) picks the next, and
 * the record (record.ts) keeps all of it.
 *
 * @example
 * ```ts
 * const result = await tune({ command: ["python", "train.py", "--config", "config.yaml"], cwd, maxTrials: 12, maxTimeS: 600,
 *   warmupSteps: 1, measureSteps: 20, trialTimeLimitS: 120 }, { devices: openDevices(), store });
 * ```
 * @module
 */
import { dirname } from "node:path";
import { UsageError } from "../errors/index.ts";
import { formatBytes } from "../bytes.ts";
import { mean, median } from "../stats.ts";
import { newRecordId } from "../record/store.ts";
import { codeKnobs, describeBindings, fillTemplate, resolveBindings, rewriteArgv, scriptLiteral } from "../knobs/index.ts";
import type { TuneDeps, TuneOptions, TuneResult } from "./options.ts";
import { noWinnerAdvice, recordTrial, trialRecord, memoryLineRecord } from "./record.ts";
import { tuneEvaluation } from "./evaluation.ts";
import { budgetLine, newTuneRecord, removeInterruptedCopies, trialSettings, tuneBaseline, tuneCap, type TuneState } from "./setup.ts";
import { bindCode, discoverSpace } from "./discover.ts";
import { doublingBisection, exhaustiveGrid, searchKnobs } from "./search.ts";
import { effectiveBatchPolicy, jobWideRuledOut, MICRO_BATCH_KNOB } from "./space.ts";
import { planPrior, type PlanPrior } from "./plan-prior.ts";
import { CONFIRM_PAIRS, confirmationOutcome, confirmWinner, type Confirmation } from "./confirm.ts";
import { judgeTrial, winnerPolicy } from "./effective.ts";
import { evidenceOf, stillLimits } from "./evidence.ts";
import { knobsKey } from "./strategies/axis.ts";
import { withinTrialNoise } from "./strategies/noise.ts";
import { runTrial, type TrialOutcome } from "./trial.ts";
import { contextFor, interruptedResult, repeatedRates } from "./trial-context.ts";
import { confirmationParity } from "./parity-check.ts";
import { parityRefusal } from "./parity.ts";
import type { Knobs, SearchOptions, SearchOutcome, StopReason, TrialResult, TrialRunner, TuneSpace } from "./types.ts";
import { ENDED_TOO_SOON } from "./types.ts";

export { samplesMismatch, SAMPLES_TOLERANCE } from "./effective.ts";
export { buildSpace } from "./space.ts";
export {
  DEFAULT_STABLE_WITHIN,
  DEFAULT_WINDOW_S,
  TUNE_STRATEGIES,
  type TrialProgress,
  type TuneDeps,
  type TuneOptions,
  type TuneResult,
  type TuneStrategy,
} from "./options.ts";

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
  await removeInterruptedCopies(bindings, deps.store, note);
  bindingNotes.unshift(describeBindings(bindings, documents, options.cwd));
  bindingNotes.forEach(note);
  const cap = tuneCap(options, deps.devices);
  note(`cap ${formatBytes(cap.capBytes)} ${cap.scope === "gpu" ? "GPU" : "RAM"}: ${cap.why}`);
  const baseline = tuneBaseline(options, bindings, documents);
  note(budgetLine(options));
  const record = newTuneRecord(options, newRecordId(), bindings, documents, cap, bindingNotes);
  await deps.store.writeTune(record);
  const settings = trialSettings(options, record.id, bindings, documents, cap);
  try {
    const state: TuneState = {
      record,
      bindings,
      documents,
      baseline,
      settings,
      note,
      now,
      tuneStartedAt: now(),
      codeHints: [],
      measured: [],
      interrupted: false,
      untrusted: null,
      finding: null,
      runIds: new Map(),
    };
    return await runTune(options, deps, state);
  } finally {
    // an error or Ctrl-C mid-tune still leaves a finished record of what was measured
    if (record.ended_at === null) {
      record.ended_at = new Date().toISOString();
      record.stop_reason ??= options.abortSignal?.aborted === true ? "interrupted" : "error";
      await deps.store.writeTune(record);
    }
  }
}

/** The steps of a tune after its set-up: trial 0, knob discovery, the search, the confirmation, the record. */
async function runTune(options: TuneOptions, deps: TuneDeps, state: TuneState): Promise<TuneResult> {
  noteConfigsNotInCommand(state);
  const first = await countedByLiteral(options, deps, state, await runBaseline(options, deps, state));
  if (untunable(first.result)) return finish(options, deps, state, null, first.result.end === "interrupted" ? "interrupted" : "converged");
  const space = discoverSpace(options, deps, state, first);
  const ruledOut = jobWideRuledOut(space, evidenceOf(first.result, state.baseline, state.settings.capBytes));
  if (space.microBatch === undefined && (space.others.length === 0 || ruledOut !== null)) {
    // nothing to vary: trial 0 is all there is, and it is not a winner
    ruledOut?.forEach(state.note);
    return finish(options, deps, state, null, "nothing_to_tune");
  }
  state.record.effective_batch = space.effectiveBatch ?? null;
  const policy = effectiveBatchPolicy(space, options);
  state.record.effective_batch_policy = { kind: policy.kind, before: policy.value, after: null, text: policy.text };
  const prior = await planSeed(deps, state);
  const outcome = await runSearch(options, deps, state, first.result, space, prior);
  const confirmation = await confirm(options, deps, state, outcome);
  const parity = await confirmationParity(deps.store, state.record);
  if (parity !== null) state.record.parity = parity;
  return finish(options, deps, state, outcome, state.interrupted ? "interrupted" : outcome.stopReason, confirmation);
}

function noteConfigsNotInCommand({ bindings, settings, note }: TuneState): void {
  for (const binding of bindings) {
    if (binding.via === "config" && !settings.namedInCommand.some((entry) => entry.path === binding.file)) {
      note(
        `${binding.file} is not named in the command: trials pass ${binding.knob} through the environment only (brim.knob), and apply writes it to the file`,
      );
    }
  }
}

/** A job that does not run as configured for another reason than memory cannot be tuned. */
function untunable(result: TrialResult): boolean {
  return result.end !== "ok" && result.failure?.kind !== "memory" && result.failure?.kind !== "cap" && result.oomRecoveries === 0;
}

/** Runs one trial (none once the tune was interrupted) and keeps its measurement; the first mismatch of samples per step is said. */
async function runOne(options: TuneOptions, deps: TuneDeps, state: TuneState, knobs: Knobs, index: number): Promise<TrialOutcome> {
  if (state.interrupted || options.abortSignal?.aborted === true) return { result: interruptedResult(), runId: null, knobsRead: new Map(), loaders: [] };
  const { measured } = state;
  const outcome = await runTrial(state.settings, knobs, contextFor(measured, knobs, index), deps, index);
  if (outcome.result.end === "interrupted") state.interrupted = true;
  const first = measured[0];
  const judged = first !== undefined ? judgeTrial(first, { knobs, result: outcome.result }) : { result: outcome.result, untrusted: null };
  outcome.result = judged.result;
  measured.push({ knobs, result: outcome.result });
  // each finding said once: the first trial marked not comparable, and the first that stops the tune
  const { notComparable } = outcome.result;
  if (judged.untrusted !== null && state.untrusted === null) {
    state.untrusted = judged.untrusted;
    state.note(judged.untrusted);
  } else if (notComparable !== undefined && state.finding === null) {
    state.finding = notComparable;
    // the search goes on without that knob: only this trial's numbers are left out
    state.note(notComparable.replace(/[;:] no winner is picked on these numbers$/, "; this trial is left out of the comparison"));
  }
  return outcome;
}

/** Trial 0: the user's configuration as it is, the "before". */
async function runBaseline(options: TuneOptions, deps: TuneDeps, state: TuneState): Promise<TrialOutcome> {
  const { baseline } = state;
  state.note('trial 0 runs your configuration as it is (the "before")');
  // the counter's total during the search: its budget (the confirmation counts its own trials)
  const progress = { index: 0, knobs: baseline, purpose: "baseline", bestIndex: null, plannedTotal: options.maxTrials };
  options.onTrialStart?.({ ...progress });
  const first = await runOne(options, deps, state, baseline, 0);
  options.onTrialEnd?.({ ...progress, result: first.result, runId: first.runId });
  await recordTrial(state.record, deps.store, 0, baseline, "baseline", first.result, first.runId);
  state.runIds.set(0, first.runId);
  return first;
}

/**
 * Trial 0 made steps but the job reports no sample count, and its script writes its batch size as a
 * literal (a loop with no DataLoader): that literal counts the samples of a step, so trial 0 runs again with it.
 */
async function countedByLiteral(options: TuneOptions, deps: TuneDeps, state: TuneState, first: TrialOutcome): Promise<TrialOutcome> {
  // a job that ended too soon had its samples: counting them another way would not help
  const noSamples = first.result.end === "no_steps" || first.result.rateUnit !== undefined;
  if (!noSamples || state.baseline[MICRO_BATCH_KNOB] !== undefined || first.result.failure?.cause.startsWith(ENDED_TOO_SOON) === true) return first;
  const literal = codeKnobs(first.loaders.length > 0 ? first.loaders : scriptLiteral(options.command, state.settings.cwd), state.baseline).find(
    (code) => code.knob === MICRO_BATCH_KNOB,
  );
  if (literal === undefined) return first;
  bindCode(state, literal);
  state.note("trial 0 reported no sample count: it runs again, its samples counted from that batch size");
  state.measured.length = 0;
  return runBaseline(options, deps, state);
}

/** The plan's memory figures for the config named in the command: they seed the first memory probe. */
async function planSeed(deps: TuneDeps, { settings, documents, baseline, note }: TuneState): Promise<PlanPrior | null> {
  const configFile = settings.namedInCommand[0]?.path;
  const inventory = deps.devices.inventory();
  const prior =
    configFile === undefined ? null : await planPrior(documents.get(configFile)?.data, dirname(configFile), inventory, settings.capBytes, baseline.precision);
  if (prior !== null)
    note(
      `the plan seeds the first memory probe: ${prior.source} gives ${formatBytes(prior.bytesPerSample)} per sample over ${formatBytes(prior.fixedBytes)}, largest micro-batch ${prior.maxMicroBatch ?? "?"}`,
    );
  return prior;
}

/** The search `--strategy` names; the two classic ones are there to compare against, and said so. */
function searchOf(options: TuneOptions, note: (line: string) => void): typeof searchKnobs {
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
  return search;
}

/** The search over `space`: each trial recorded as it ends; the record's trials are the search's. */
async function runSearch(
  options: TuneOptions,
  deps: TuneDeps,
  state: TuneState,
  baselineResult: TrialResult,
  space: TuneSpace,
  prior: PlanPrior | null,
): Promise<SearchOutcome> {
  const { record, runIds } = state;
  let searchIndex = 0;
  const runner: TrialRunner = {
    run: async (knobs, purpose) => {
      const index = searchIndex++;
      // The search's first trial is the baseline by contract: trial 0 already ran it.
      if (index === 0) return baselineResult;
      const { result, runId } = await runOne(options, deps, state, knobs, index);
      runIds.set(index, runId);
      await recordTrial(record, deps.store, index, knobs, purpose, result, runId);
      return result;
    },
  };
  const outcome = await searchOf(options, state.note)(space, runner, searchOptions(options, state, prior));
  record.trials = outcome.trials.map((t) => trialRecord(t.index, t.knobs, t.purpose, t.result, runIds.get(t.index) ?? null));
  return outcome;
}

/** The search's budgets (the time left of the tune's), the plan's prior, and progress reported with the trial's run. */
function searchOptions(options: TuneOptions, state: TuneState, prior: PlanPrior | null): SearchOptions {
  const { settings, now, tuneStartedAt, runIds } = state;
  return {
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
    stopWhen: () => (state.untrusted !== null ? "untrusted" : null),
    onNote: state.note,
    onTrial: (event) => {
      if (event.index === 0) return;
      const progress = { ...event, plannedTotal: options.maxTrials };
      if (event.result === undefined) options.onTrialStart?.(progress);
      else options.onTrialEnd?.({ ...progress, result: event.result, runId: runIds.get(event.index) ?? null });
    },
  };
}

/** A winner other than the baseline is measured again against it, interleaved (A/B/A/B): the speedup printed is this one, never the search's own. */
async function confirm(options: TuneOptions, deps: TuneDeps, state: TuneState, outcome: SearchOutcome): Promise<Confirmation | null> {
  const { now, tuneStartedAt } = state;
  const baselineKnobs = outcome.trials[0]?.knobs ?? state.baseline;
  const winnerKnobs = state.untrusted === null && outcome.stopReason !== "untrusted" ? outcome.best?.knobs : undefined;
  if (winnerKnobs === undefined || knobsKey(winnerKnobs) === knobsKey(baselineKnobs)) return null;
  const firstConfirm = Math.max(...outcome.trials.map((t) => t.index)) + 1;
  let next = firstConfirm;
  const durations: number[] = [];
  const repeats = repeatedRates(outcome.trials.filter((t) => t.result.end === "ok" && t.result.samplesPerSecond !== null));
  const within = outcome.trials.map((t) => withinTrialNoise(t.result.stepSeconds)).filter((v): v is number => v !== null);
  state.note(`confirming the winner: it and your configuration are measured again, interleaved (A/B/A/B), for the speedup and its interval`);
  return confirmWinner(
    baselineKnobs,
    winnerKnobs,
    async (knobs, purpose) => {
      const index = next++;
      const pairs = Math.max(CONFIRM_PAIRS, Math.ceil((index - firstConfirm + 1) / 2));
      const progress = { index, knobs, purpose, bestIndex: outcome.bestIndex, plannedTotal: firstConfirm + 2 * pairs };
      options.onTrialStart?.(progress);
      const { result, runId } = await runOne(options, deps, state, knobs, index);
      durations.push(result.durationS);
      options.onTrialEnd?.({ ...progress, result, runId });
      await recordTrial(state.record, deps.store, index, knobs, purpose, result, runId);
      return result;
    },
    repeats,
    median(within) ?? 0,
    () => now() - tuneStartedAt + 2 * Math.max(...durations, 0) <= options.maxTimeS,
  );
}

/** The record: the winner and its speedup, the memory line, what still limits, advice when none won; written and returned. */
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
  const refused = record.winner !== null ? parityRefusal(record.parity) : null;
  if (refused !== null) record.winner = null;
  if (outcome !== null) {
    record.noise = outcome.noise;
    record.memory_line = memoryLineRecord(outcome.memoryLine);
    record.notes = [...record.notes, ...outcome.notes];
    if (outcome.dropped !== undefined) record.dropped = outcome.dropped;
  }
  const policy = record.effective_batch_policy;
  if (policy !== undefined && record.winner !== null) Object.assign(policy, winnerPolicy(policy, record.winner.knobs, best?.result));
  const ending = record.winner !== null ? trials.find((t) => t.index === record.winner?.index) : trials[0];
  if (ending !== undefined && ending.result.end === "ok") record.limits = stillLimits(evidenceOf(ending.result, ending.knobs, record.cap_bytes), ending.knobs);
  if (state.codeHints.length > 0) record.limits = [...(record.limits ?? []), ...state.codeHints];
  const evaluation = tuneEvaluation(record.trials, record.winner?.knobs ?? null);
  if (evaluation !== null) record.evaluation = evaluation;
  record.no_winner =
    record.winner === null && stopReason !== "interrupted"
      ? (refused ?? noGain?.advice ?? noWinnerAdvice(record.trials, stopReason, formatBytes(record.cap_bytes), state.untrusted ?? state.finding))
      : null;
  record.ended_at = new Date().toISOString();
  await deps.store.writeTune(record);
  const argv = state.bindings.filter((binding) => binding.via === "argv");
  const winnerCommand = record.winner ? rewriteArgv(fillTemplate(options.command, record.winner.knobs), argv, record.winner.knobs) : null;
  return { record, outcome, bindings: state.bindings, winnerCommand };
}
