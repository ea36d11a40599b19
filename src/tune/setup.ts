/**
 * The set-up of a tune, before trial 0: stale trial copies removed, the cap, the baseline's knobs,
 * the budget said, the record opened, and what every trial shares.
 *
 * @example
 * ```ts
 * const cap = tuneCap(options, deps.devices);
 * const settings = trialSettings(options, record.id, bindings, documents, cap);
 * ```
 * @module
 */
import { removeStaleTrialCopies, type ConfigDocument } from "../configs/index.ts";
import type { Devices } from "../devices/index.ts";
import type { RunStore } from "../record/store.ts";
import type { TuneRecord } from "../record/types.ts";
import { CONFIRM_PAIRS, CONFIRM_PAIRS_MAX } from "./confirm.ts";
import { configBaseline, configFilesInCommand, type KnobBinding } from "../knobs/index.ts";
import { DEFAULT_STABLE_WITHIN, DEFAULT_WINDOW_S, type TuneOptions } from "./options.ts";
import { bindingRecord } from "./record.ts";
import { defaultCap } from "./space.ts";
import type { TrialSettings } from "./trial.ts";
import type { Knobs, TrialResult } from "./types.ts";

/** The cap of a tune: its bytes, what it caps, and why that much. */
export interface TuneCap {
  capBytes: number;
  scope: "gpu" | "ram";
  why: string;
}

/** A tune killed before it could clean up left trial copies beside the user's config: gone now. */
export async function removeInterruptedCopies(bindings: readonly KnobBinding[], store: RunStore, note: (line: string) => void): Promise<void> {
  for (const file of new Set(bindings.flatMap((b) => (b.via === "config" ? [b.file] : [])))) {
    const removed = await removeStaleTrialCopies(file, store);
    if (removed.length > 0) note(`removed ${removed.length} cop${removed.length === 1 ? "y" : "ies"} of ${file} that an interrupted tune or plan left`);
  }
}

/** `--cap`, or the default cap of the devices. */
export function tuneCap(options: TuneOptions, devices: Devices): TuneCap {
  return options.capBytes !== undefined
    ? { capBytes: options.capBytes, scope: devices.inventory().backend === "cpu" ? "ram" : "gpu", why: "--cap" }
    : defaultCap(devices);
}

/** The knobs of trial 0: the config's values, and the first value given to `--knob` for a knob the config does not set. */
export function tuneBaseline(options: TuneOptions, bindings: KnobBinding[], documents: Map<string, ConfigDocument>): Knobs {
  const baseline: Knobs = configBaseline(bindings, documents);
  for (const [knob, values] of Object.entries(options.knobValues ?? {})) {
    if (baseline[knob] === undefined && values[0] !== undefined) baseline[knob] = values[0];
  }
  return baseline;
}

/** What every trial of one tune shares. */
export function trialSettings(
  options: TuneOptions,
  tuneId: string,
  bindings: KnobBinding[],
  documents: Map<string, ConfigDocument>,
  cap: TuneCap,
): TrialSettings {
  return {
    command: options.command,
    cwd: options.cwd,
    tuneId,
    bindings,
    documents,
    namedInCommand: configFilesInCommand(options.command, options.cwd),
    capBytes: cap.capBytes,
    capScope: cap.scope,
    window: {
      warmupSteps: options.warmupSteps,
      maxSteps: options.measureSteps,
      minSteps: 3,
      windowS: options.windowS ?? DEFAULT_WINDOW_S,
      stableWithin: options.stableWithin ?? DEFAULT_STABLE_WITHIN,
      // the default window waits for the steps this job's noise asks (K); a --window given overrides it
      ...(options.windowS === undefined ? { noiseTarget: (options.stableWithin ?? DEFAULT_STABLE_WITHIN) / 2 } : {}),
    },
    timeLimitS: options.trialTimeLimitS,
    hz: options.hz,
    forwardSignals: options.forwardSignals,
    onState: options.onState,
    onNote: options.onNote,
    maxTimeS: options.maxTimeS,
  };
}

/** The budget of the tune and of each trial, as said before trial 0. */
export function budgetLine(options: TuneOptions): string {
  const windowS = options.windowS ?? DEFAULT_WINDOW_S;
  const stableWithin = options.stableWithin ?? DEFAULT_STABLE_WITHIN;
  return (
    `budget: ${options.maxTrials} trials or ${Math.round(options.maxTimeS)} s, whichever ends first, then ${2 * CONFIRM_PAIRS} (up to ${2 * CONFIRM_PAIRS_MAX}) to confirm a winner against your configuration; each trial leaves out its warm-up, ` +
    `then measures until throughput is stable within ±${(stableWithin * 100).toFixed(0)} %, ${options.measureSteps} steps or ${windowS} s${options.windowS === undefined ? " once it has the steady steps this job's noise asks" : ""}, and stops early when clearly slower than the best; how long that takes on this job is said at trial 0's first steady step`
  );
}

/** The tune's record as it starts: no trial, no winner, not ended. */
export function newTuneRecord(
  options: TuneOptions,
  id: string,
  bindings: KnobBinding[],
  documents: Map<string, ConfigDocument>,
  cap: TuneCap,
  notes: readonly string[],
): TuneRecord {
  return {
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
    notes: [...notes],
    budget: { max_trials: options.maxTrials, max_time_s: options.maxTimeS },
  };
}

/** One tune's state, from its set-up to its record: what every step reads and what the trials change. */
export interface TuneState {
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
  /** every trial's knobs and result, in the order they ran */
  measured: { knobs: Knobs; result: TrialResult }[];
  /** a trial was interrupted: no further trial starts */
  interrupted: boolean;
  /** why no trial's throughput can be compared: samples per step that moved at the baseline's own batch, once seen */
  untrusted: string | null;
  /** the first trial at another micro-batch marked not comparable: its finding (the search drops the micro-batch knob) */
  finding: string | null;
  /** each trial's run in the store, by trial index */
  runIds: Map<number, string | null>;
}
