/**
 * What `brim tune` is asked and what it gives back: its options, dependencies, progress events and
 * result, and the defaults of a trial's window. tune.ts re-exports all of it.
 *
 * @example
 * ```ts
 * const options: TuneOptions = { command: ["python", "train.py"], cwd, maxTrials: 12, maxTimeS: 600,
 *   warmupSteps: 1, measureSteps: 20, trialTimeLimitS: 120 };
 * ```
 * @module
 */
import type { Devices } from "../devices/index.ts";
import type { LiveState } from "../guard/live.ts";
import type { RunStore } from "../record/store.ts";
import type { TuneRecord } from "../record/types.ts";
import type { KnobBinding } from "../knobs/index.ts";
import type { KnobValue, Knobs, SearchOutcome, TrialResult } from "./types.ts";

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
  /**
   * seconds of measured steps per trial at most. Absent: 10, and a trial's window waits for the K
   * steady steps its job's noise asks (window.ts `noiseSteps`); given: it overrides that (3 steps).
   */
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
