import { rmSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { readConfig, writeFileAtomic, editConfigText, type ConfigDocument } from "../configs/index.ts";
import type { Devices } from "../devices/index.ts";
import { BrimError, UsageError } from "../errors/index.ts";
import { guardRun, type GuardResult } from "../guard/guard.ts";
import type { LiveState } from "../guard/live.ts";
import { findGpu } from "../plan/catalog.ts";
import { newRecordId, type RunStore } from "../record/store.ts";
import { mainProcessSteps } from "../record/summary.ts";
import type { KnobBindingRecord, TuneRecord, TuneTrialRecord } from "../record/types.ts";
import {
  asKnobValue,
  candidateValues,
  configBaseline,
  configFilesInCommand,
  detectKnobKeys,
  fillTemplate,
  KNOWN_KNOBS,
  templateKnobs,
  type CandidateContext,
  type KnobBinding,
} from "./knobs.ts";
import { doublingBisection, exhaustiveGrid, searchKnobs, type KnobValue, type Knobs, type SearchOutcome, type TrialResult, type TuneSpace } from "./search.ts";

/** Knob names that are the micro-batch and the gradient accumulation. */
export const MICRO_BATCH_KNOB = "batch_size";
export const ACCUMULATION_KNOB = "accumulation";

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
  warmupSteps: number;
  measureSteps: number;
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
  plannedTotal: number;
}

/** What `brim tune` produced. */
export interface TuneResult {
  record: TuneRecord;
  outcome: SearchOutcome;
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

/**
 * How each knob reaches the job: `{name}` templates in the command, explicit `--bind`s, and known knob
 * names found in a config file named in the command. Every knob also reaches the SDK through the
 * environment (`brim.knob`).
 *
 * @example
 * ```ts
 * const { bindings, documents, notes } = await resolveBindings(["python", "train.py", "--config", "config.yaml"], "/proj", []);
 * ```
 */
export async function resolveBindings(
  command: readonly string[],
  cwd: string,
  explicit: readonly KnobBinding[],
): Promise<{ bindings: KnobBinding[]; documents: Map<string, ConfigDocument>; notes: string[] }> {
  const bindings: KnobBinding[] = [];
  const notes: string[] = [];
  const documents = new Map<string, ConfigDocument>();
  const bound = (knob: string): boolean => bindings.some((binding) => binding.knob === knob);
  for (const knob of templateKnobs(command)) bindings.push({ knob, via: "template" });
  for (const binding of explicit) {
    if (bound(binding.knob)) throw new UsageError(`knob ${binding.knob} is bound twice (a {${binding.knob}} template and --bind)`);
    bindings.push(binding);
  }
  for (const binding of bindings) {
    if (binding.via === "config" && !documents.has(binding.file)) documents.set(binding.file, await readConfig(binding.file));
  }
  const configs = configFilesInCommand(command, cwd);
  const first = configs[0];
  if (first !== undefined) {
    const document = documents.get(first.path) ?? (await readConfig(first.path));
    documents.set(first.path, document);
    const detected = detectKnobKeys(document.data);
    for (const found of detected.found) {
      if (bound(found.knob)) continue;
      bindings.push({ knob: found.knob, via: "config", file: first.path, key: found.key });
    }
    notes.push(...detected.notes);
    if (configs.length > 1) notes.push(`several config files in the command; knobs were looked for in ${first.arg} only (bind others with --bind)`);
  }
  return { bindings, documents, notes };
}

function contextFor(devices: Devices): CandidateContext {
  const inventory = devices.inventory();
  const gpu = inventory.gpus[0];
  const spec = gpu ? findGpu(gpu.name) : undefined;
  const architecture = spec?.architecture;
  const modern = architecture !== undefined && !["pascal", "maxwell", "kepler"].includes(architecture);
  const bf16 = architecture !== undefined && !["pascal", "maxwell", "kepler", "volta", "turing"].includes(architecture);
  return { backend: inventory.backend, bf16, tensorCores: modern, cpus: inventory.host.cpus };
}

function defaultCap(devices: Devices): { capBytes: number; scope: "gpu" | "ram"; why: string } {
  const inventory = devices.inventory();
  const gpu = inventory.gpus[0];
  if (inventory.backend !== "cpu" && gpu !== undefined) {
    return { capBytes: Math.floor(gpu.totalBytes * 0.9), scope: "gpu", why: `90% of ${gpu.name}'s memory (set --cap to change)` };
  }
  return { capBytes: Math.floor(inventory.host.memTotalBytes * 0.5), scope: "ram", why: "half of this machine's RAM, CPU mode (set --cap to change)" };
}

const finite = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value);

function trialResultOf(run: GuardResult, capScope: "gpu" | "ram"): TrialResult {
  const cause = run.meta.end?.cause ?? "crashed";
  // A trial whose guard or store failed counts as crashed for the search.
  const end = cause === "store_failed" || cause === "supervisor_lost" ? "crashed" : cause;
  const steady = mainProcessSteps(run.timeline).filter((step) => step.warmup !== true);
  const stepSeconds = steady.map((step) => (finite(step.wait_s) ? step.wait_s : 0) + (finite(step.compute_s) ? step.compute_s : 0));
  const summary = run.summary;
  return {
    end: end === "ok" && steady.length === 0 ? "no_steps" : end,
    samplesPerSecond: summary.samples_per_s,
    stepSeconds,
    peakBytes: capScope === "gpu" ? summary.peak_tree_gpu_bytes : summary.peak_tree_rss_bytes,
    frameworkPeakBytes: summary.framework_peak_allocated_bytes,
    durationS: summary.duration_s,
    oomRecoveries: summary.oom_recoveries,
    gpuUtilMean: summary.gpu_util_mean,
    dataWaitShare: summary.data_wait_share,
  };
}

function trialFileName(file: string, tuneId: string, index: number): string {
  return join(dirname(file), `.${basename(file)}.brim-trial-${tuneId}-${index}${file.slice(file.lastIndexOf("."))}`);
}

/**
 * `brim tune`: runs the user's job on short trials through the guard and searches for the fastest
 * knob values that fit the cap. Trial 0 is the user's configuration as it is. The tune and each trial
 * land in the run store; the user's files are not touched (trial values go to temporary copies of
 * the config next to it, removed after each trial).
 *
 * @example
 * ```ts
 * const result = await tune({ command: ["python", "train.py", "--config", "config.yaml"], cwd, maxTrials: 12, maxTimeS: 600,
 *   warmupSteps: 3, measureSteps: 12, trialTimeLimitS: 120 }, { devices: openDevices(), store });
 * console.log(result.record.winner);
 * ```
 */
export async function tune(options: TuneOptions, deps: TuneDeps): Promise<TuneResult> {
  if (options.command.length === 0) throw new UsageError("no command to tune: put it after --, e.g. brim tune -- python train.py --config config.yaml");
  const now = deps.now ?? ((): number => Date.now() / 1000);
  const note = (line: string): void => options.onNote?.(line);
  const { bindings, documents, notes: bindingNotes } = await resolveBindings(options.command, options.cwd, options.bindings ?? []);
  bindingNotes.forEach(note);
  const cap = options.capBytes !== undefined ? { capBytes: options.capBytes, scope: devicesScope(deps.devices), why: "--cap" } : defaultCap(deps.devices);
  note(`cap ${(cap.capBytes / 2 ** 30).toFixed(2)} GiB ${cap.scope === "gpu" ? "GPU" : "RAM"}: ${cap.why}`);

  const baseline: Knobs = configBaseline(bindings, documents);
  for (const [knob, values] of Object.entries(options.knobValues ?? {})) {
    if (baseline[knob] === undefined && values[0] !== undefined) baseline[knob] = values[0];
  }
  const id = newRecordId();
  const startedAt = new Date();
  const tuneStartedAt = now();
  const record: TuneRecord = {
    schema: "brim.tune/v1",
    id,
    command: options.command,
    cwd: options.cwd,
    bindings: bindings.map((binding) => bindingRecord(binding, documents)),
    cap_bytes: cap.capBytes,
    cap_scope: cap.scope,
    effective_batch: options.effectiveBatch ?? null,
    started_at: startedAt.toISOString(),
    ended_at: null,
    trials: [],
    winner: null,
    stop_reason: null,
    strategy: options.strategy ?? "brim",
    memory_line: null,
    notes: [...bindingNotes],
  };
  await deps.store.writeTune(record);
  try {
    return await runTune(options, deps, { record, id, bindings, documents, baseline, cap, note, now, tuneStartedAt });
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
  id: string;
  bindings: KnobBinding[];
  documents: Map<string, ConfigDocument>;
  baseline: Knobs;
  cap: { capBytes: number; scope: "gpu" | "ram"; why: string };
  note: (line: string) => void;
  now: () => number;
  tuneStartedAt: number;
}

async function runTune(options: TuneOptions, deps: TuneDeps, state: TuneState): Promise<TuneResult> {
  const { record, id, bindings, documents, baseline, cap, note, now, tuneStartedAt } = state;
  const namedInCommand = configFilesInCommand(options.command, options.cwd);
  for (const binding of bindings) {
    if (binding.via === "config" && !namedInCommand.some((entry) => entry.path === binding.file)) {
      note(`${binding.file} is not named in the command: trials pass ${binding.knob} through the environment only (brim.knob), and apply writes it to the file`);
    }
  }
  const knobsRead = new Map<string, KnobValue>();
  let interrupted = false;
  let trialIndex = 0;
  const runTrial = async (knobs: Knobs): Promise<{ result: TrialResult; runId: string | null }> => {
    const index = trialIndex++;
    if (interrupted || options.abortSignal?.aborted === true) return { result: interruptedResult(), runId: null };
    const trialFiles: string[] = [];
    try {
      const command = fillTemplate(options.command, knobs);
      const byFile = new Map<string, { key: string; value: KnobValue }[]>();
      for (const binding of bindings) {
        const value = knobs[binding.knob];
        if (binding.via !== "config" || value === undefined) continue;
        byFile.set(binding.file, [...(byFile.get(binding.file) ?? []), { key: binding.key, value }]);
      }
      for (const [file, edits] of byFile) {
        const document = documents.get(file);
        if (!document) continue;
        const { text } = editConfigText(document, edits);
        const copy = trialFileName(file, id, index);
        const places = namedInCommand.filter((entry) => entry.path === file);
        if (places.length === 0) continue;
        await writeFileAtomic(copy, text);
        trialFiles.push(copy);
        for (const place of places) command[place.index] = (command[place.index] ?? "").replace(place.arg, copy);
      }
      const run = await guardRun(
        {
          command,
          cwd: options.cwd,
          kind: "trial",
          tuneId: id,
          capBytes: cap.capBytes,
          shrink: false,
          knobs,
          stepBudget: options.warmupSteps + options.measureSteps,
          warmupSteps: options.warmupSteps,
          hz: options.hz ?? 10,
          hungAfterS: Math.max(30, options.trialTimeLimitS / 2),
          timeLimitS: options.trialTimeLimitS,
          killGraceS: 5,
          forwardSignals: options.forwardSignals,
          onState: options.onState,
        },
        { devices: deps.devices, store: deps.store },
      );
      for (const entry of run.timeline) {
        if (entry.kind !== "event" || entry.event !== "knob_read") continue;
        const details = entry.details as { name?: unknown; default?: unknown } | undefined;
        const value = asKnobValue(details?.default);
        if (typeof details?.name === "string" && value !== undefined && !knobsRead.has(details.name)) knobsRead.set(details.name, value);
      }
      const result = trialResultOf(run, cap.scope);
      if (result.end === "interrupted") interrupted = true;
      if (result.end === "crashed" && index === 0) {
        throw new BrimError("E_JOB_START", `trial 0 (your configuration as it is) failed: ${run.meta.end?.message ?? "crashed"}; output.log of run ${run.meta.id} has the details`);
      }
      return { result, runId: run.meta.id };
    } finally {
      for (const file of trialFiles) rmSync(file, { force: true });
    }
  };

  note("trial 0 runs your configuration as it is (the \"before\")");
  options.onTrialStart?.({ index: 0, knobs: baseline, purpose: "baseline", bestIndex: null, plannedTotal: options.maxTrials });
  const first = await runTrial(baseline);
  options.onTrialEnd?.({ index: 0, knobs: baseline, purpose: "baseline", bestIndex: null, plannedTotal: options.maxTrials, ...first });
  await recordTrial(record, deps.store, 0, baseline, "baseline", first.result, first.runId);

  // Knobs the job read through brim.knob join the baseline when brim knows how to tune them or the user named them.
  for (const [knob, value] of knobsRead) {
    if (baseline[knob] === undefined && (knob in KNOWN_KNOBS || options.knobValues?.[knob] !== undefined)) baseline[knob] = value;
  }
  const space = buildSpace(baseline, options, [...bindings.map((b) => b.knob), ...knobsRead.keys(), ...Object.keys(options.knobValues ?? {})], contextFor(deps.devices), note);
  record.effective_batch = space.effectiveBatch ?? null;
  const runIds = new Map<number, string | null>([[0, first.runId]]);
  let searchIndex = 0;
  const strategy = options.strategy ?? "brim";
  const search: typeof searchKnobs =
    strategy === "doubling-bisection"
      ? doublingBisection
      : strategy === "grid"
        ? (gridSpace, runner, searchOptions) =>
            exhaustiveGrid(gridSpace, runner, { ...searchOptions, microBatches: (options.knobValues?.[MICRO_BATCH_KNOB] ?? [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]).filter((value): value is number => typeof value === "number") })
        : searchKnobs;
  if (strategy !== "brim") note(`search strategy: ${strategy} (for comparison with brim's own)`);
  const outcome = await search(
    space,
    {
      run: async (knobs, purpose) => {
        const index = searchIndex++;
        // The search's first trial is the baseline by contract: trial 0 already ran it (the knobs the
        // job read with their defaults were added to the baseline since, which is the same configuration).
        if (index === 0) return first.result;
        const { result, runId } = await runTrial(knobs);
        runIds.set(index, runId);
        await recordTrial(record, deps.store, index, knobs, purpose, result, runId);
        return result;
      },
    },
    {
      capBytes: cap.capBytes,
      maxTrials: options.maxTrials,
      maxTimeS: Math.max(1, options.maxTimeS - (now() - tuneStartedAt)),
      now,
      onTrial: (event) => {
        if (event.index === 0) return;
        if (event.result === undefined) options.onTrialStart?.(event);
        else options.onTrialEnd?.({ ...event, result: event.result, runId: runIds.get(event.index) ?? null });
      },
    },
  );

  record.trials = outcome.trials.map((trial) => trialRecord(trial.index, trial.knobs, trial.purpose, trial.result, runIds.get(trial.index) ?? null));
  // the "before" is the mean of every measurement of the baseline configuration, as the winner's is
  const baselineKey = canonicalKnobs(outcome.trials[0]?.knobs ?? {});
  const baselineRates = outcome.trials
    .filter((trial) => canonicalKnobs(trial.knobs) === baselineKey && trial.result.end === "ok" && trial.result.samplesPerSecond !== null)
    .map((trial) => trial.result.samplesPerSecond as number);
  const baselineRate = baselineRates.length > 0 ? baselineRates.reduce((a, b) => a + b, 0) / baselineRates.length : null;
  const best = outcome.bestIndex !== null ? outcome.trials[outcome.bestIndex] : undefined;
  const bestRate = outcome.best?.samplesPerSecond ?? best?.result.samplesPerSecond ?? null;
  record.winner = best ? { index: best.index, knobs: outcome.best?.knobs ?? best.knobs, speedup: baselineRate && bestRate ? bestRate / baselineRate : null } : null;
  record.stop_reason = outcome.stopReason;
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
  record.ended_at = new Date().toISOString();
  await deps.store.writeTune(record);
  const winnerCommand = record.winner ? fillTemplate(options.command, record.winner.knobs) : null;
  return { record, outcome, bindings, winnerCommand };
}

function canonicalKnobs(knobs: Knobs): string {
  return JSON.stringify(Object.entries(knobs).sort(([a], [b]) => a.localeCompare(b)));
}

function devicesScope(devices: Devices): "gpu" | "ram" {
  return devices.inventory().backend === "cpu" ? "ram" : "gpu";
}

function interruptedResult(): TrialResult {
  return { end: "interrupted", samplesPerSecond: null, stepSeconds: [], peakBytes: null, frameworkPeakBytes: null, durationS: 0, oomRecoveries: 0 };
}

function bindingRecord(binding: KnobBinding, documents: ReadonlyMap<string, ConfigDocument>): KnobBindingRecord {
  if (binding.via !== "config") return { knob: binding.knob, via: binding.via };
  return { knob: binding.knob, via: "config", file: binding.file, key: binding.key, file_sha256: documents.get(binding.file)?.sha256 ?? "" };
}

function trialRecord(index: number, knobs: Knobs, purpose: string, result: TrialResult, runId: string | null): TuneTrialRecord {
  return {
    index,
    run_id: runId,
    knobs,
    purpose,
    end: result.end,
    samples_per_s: result.samplesPerSecond,
    peak_bytes: result.peakBytes,
    framework_peak_bytes: result.frameworkPeakBytes,
    gpu_util_mean: result.gpuUtilMean ?? null,
    data_wait_share: result.dataWaitShare ?? null,
    duration_s: result.durationS,
    oom_recoveries: result.oomRecoveries,
  };
}

async function recordTrial(record: TuneRecord, store: RunStore, index: number, knobs: Knobs, purpose: string, result: TrialResult, runId: string | null): Promise<void> {
  record.trials = [...record.trials.filter((trial) => trial.index !== index), trialRecord(index, knobs, purpose, result, runId)];
  await store.writeTune(record);
}

/**
 * The search space from the baseline and what the job has: the micro-batch and accumulation knobs,
 * the effective batch to hold, and candidate values for the rest.
 *
 * @example
 * ```ts
 * buildSpace({ batch_size: 4, accumulation: 16, num_workers: 0 }, options, ["batch_size", "accumulation", "num_workers"], context, console.log);
 * // { microBatch: { knob: "batch_size" }, accumulation: { knob: "accumulation" }, effectiveBatch: 64, others: [...] }
 * ```
 */
export function buildSpace(baseline: Knobs, options: Pick<TuneOptions, "effectiveBatch" | "freeBatch" | "knobValues" | "fixed" | "maxMicroBatch">, known: readonly string[], context: CandidateContext, note: (line: string) => void): TuneSpace {
  const fixed = new Set(options.fixed ?? []);
  const has = (knob: string): boolean => known.includes(knob) && baseline[knob] !== undefined && !fixed.has(knob);
  const space: TuneSpace = { baseline, others: [] };
  if (has(MICRO_BATCH_KNOB)) space.microBatch = { knob: MICRO_BATCH_KNOB, min: 1, ...(options.maxMicroBatch !== undefined ? { max: options.maxMicroBatch } : {}) };
  else note("the job has no batch_size knob (no config key found, not read through brim.knob): the micro-batch is not tuned");
  if (has(ACCUMULATION_KNOB)) space.accumulation = { knob: ACCUMULATION_KNOB };
  const micro = baseline[MICRO_BATCH_KNOB];
  const accumulation = baseline[ACCUMULATION_KNOB];
  if (options.effectiveBatch !== undefined) {
    if (space.accumulation === undefined) throw new UsageError("--effective-batch needs an accumulation knob (a config key like accumulate_grad_batches, or brim.knob('accumulation'))");
    space.effectiveBatch = options.effectiveBatch;
    note(`effective batch held at ${options.effectiveBatch} (micro-batch × accumulation)`);
  } else if (!options.freeBatch && space.accumulation !== undefined && typeof micro === "number" && typeof accumulation === "number" && accumulation > 1) {
    space.effectiveBatch = micro * accumulation;
    note(`effective batch held at ${micro} × ${accumulation} = ${micro * accumulation}, as your configuration has it (--free-batch lets it change)`);
  } else if (space.microBatch !== undefined) {
    note("the effective batch changes with the micro-batch (give --effective-batch N to hold it)");
  }
  const workers = baseline.num_workers;
  const loaderExtra = (knob: string): boolean => knob === "persistent_workers" || knob === "prefetch_factor";
  const tunable = known.filter((knob) => !fixed.has(knob) && (!loaderExtra(knob) || (typeof workers === "number" && workers > 0)));
  const candidates = candidateValues(tunable, baseline, context);
  const userLists = Object.entries(options.knobValues ?? {}).filter(([knob, values]) => values.length > 1 && knob !== MICRO_BATCH_KNOB);
  space.others = [...userLists.map(([knob, values]) => ({ knob, values })), ...candidates.filter((candidate) => !userLists.some(([knob]) => knob === candidate.knob))];
  return space;
}
