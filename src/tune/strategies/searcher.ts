/**
 * The state one {@link searchKnobs} run shares between its phases, and the questions every phase asks
 * of it: which configurations may win, which is fastest so far, how to say a number in a note.
 *
 * @example
 * ```ts
 * const s = newSearcher(space, runner, options);
 * s.fastest(s.ledger.estimates());
 * ```
 * @module
 */
import { formatBytes } from "../../bytes.ts";
import { InputError } from "../../errors/index.ts";
import { MARGIN_FLOOR } from "../memory-line.ts";
import type { Knobs, SearchOptions, SearchOutcome, TrialRunner, TuneSpace } from "../types.ts";
import { knobsKey, MicroAxis } from "./axis.ts";
import { Ledger, peakOf, type ConfigEstimate } from "./ledger.ts";
import { MemoryBook } from "./memory-book.ts";
import { pickFastest } from "./noise.ts";

/** Everything a search's phases share. */
export interface Searcher {
  space: TuneSpace;
  options: SearchOptions;
  axis: MicroAxis;
  ledger: Ledger;
  memory: MemoryBook;
  notes: string[];
  /** the configuration coordinate descent holds now (null before it starts) */
  incumbent: ConfigEstimate | null;
  /** configurations that ran but left less than the floor margin free, already noted */
  tooClose: Set<string>;
  /** contexts (by key) whose memory moved off the line they were compared on */
  ownLines: Set<string>;
  /** contexts (by key) whose micro-batch phase has run */
  explored: Set<string>;
  /** memory families whose upward probes the measurement window has capped, already noted */
  stepCapped: Set<number>;
  /** the micro-batch knobs dropped after a trial came back not comparable (null: none) */
  dropped: NonNullable<SearchOutcome["dropped"]> | null;
  /** estimates that may win: ran as given, and left {@link MARGIN_FLOOR} of the cap free or lie within the memory line's limit */
  eligible(estimates: readonly ConfigEstimate[]): ConfigEstimate[];
  /** the winner among `estimates` by the noise rule, of the eligible ones */
  fastest(estimates: readonly ConfigEstimate[]): ConfigEstimate | null;
  /** estimates of configurations with this context */
  inContext(context: Knobs): ConfigEstimate[];
  /** `knobs` hold the baseline's micro-batch and accumulation: once the micro-batch knob is dropped, only these may win */
  atBaselineBatch(knobs: Knobs): boolean;
}

/**
 * Creates the shared state of one search.
 *
 * @example
 * ```ts
 * const s = newSearcher(space, runner, { capBytes: 8e9, maxTrials: 20, maxTimeS: 600, now: () => Date.now() / 1000 });
 * ```
 */
export function newSearcher(space: TuneSpace, runner: TrialRunner, options: SearchOptions): Searcher {
  const axis = new MicroAxis(space);
  const ledger = new Ledger(runner, options, axis);
  const memory = new MemoryBook(ledger, axis, options.capBytes);
  const s: Searcher = {
    space,
    options,
    axis,
    ledger,
    memory,
    notes: [],
    incumbent: null,
    tooClose: new Set(),
    ownLines: new Set(),
    explored: new Set(),
    stepCapped: new Set(),
    dropped: null,
    eligible(estimates) {
      const limit = options.capBytes * (1 - MARGIN_FLOOR);
      return estimates.filter((e) => {
        if (e.bounded === true || (ledger.dropped !== null && !s.atBaselineBatch(e.knobs))) return false;
        const peaks = e.indices.map((i) => (ledger.trials[i] === undefined ? null : peakOf(ledger.trials[i].result)));
        const highest = Math.max(...peaks.map((p) => p ?? 0));
        if (highest <= limit) return true;
        // a peak inside the floor is still fine where the line, with its margin, allows the micro-batch
        const family = memory.familyOf(axis.contextOf(e.knobs));
        const m = axis.microOf(e.knobs);
        const line = family === undefined ? null : memory.limit(family);
        if (line !== null && m !== null && m <= line.microBatch && highest <= options.capBytes) return true;
        if (!s.tooClose.has(e.key)) {
          s.tooClose.add(e.key);
          s.notes.push(
            `${describeKnobs(e.knobs)} ran but peaked at ${formatBytes(highest)}, less than ${pct(MARGIN_FLOOR)} of the cap ${formatBytes(options.capBytes)} left free, beyond what the memory line allows: not eligible to win`,
          );
        }
        return false;
      });
    },
    fastest(estimates) {
      return pickFastest(s.eligible(estimates), ledger.noise());
    },
    atBaselineBatch(knobs) {
      return [axis.knob, axis.accumulationKnob].every((k) => k === undefined || knobs[k] === space.baseline[k]);
    },
    inContext(context) {
      const key = knobsKey(context);
      return ledger.estimates().filter((e) => knobsKey(axis.contextOf(e.knobs)) === key);
    },
  };
  ledger.bestIndex = () => {
    const best = s.incumbent ?? s.fastest(ledger.estimates());
    return best?.indices.at(-1) ?? null;
  };
  return s;
}

/**
 * Throws an {@link InputError} naming the first invalid search option.
 *
 * @example
 * ```ts
 * checkOptions({ capBytes: 0, maxTrials: 10, maxTimeS: 60, now }); // throws: capBytes: must be a positive number of bytes, got 0
 * ```
 */
export function checkOptions(options: SearchOptions): void {
  if (!(options.capBytes > 0) || !Number.isFinite(options.capBytes))
    throw new InputError(`must be a positive number of bytes, got ${options.capBytes}`, { field: "capBytes" });
  if (!Number.isInteger(options.maxTrials) || options.maxTrials < 1)
    throw new InputError(`must be a positive integer, got ${options.maxTrials}`, { field: "maxTrials" });
  if (!(options.maxTimeS > 0)) throw new InputError(`must be a positive number of seconds, got ${options.maxTimeS}`, { field: "maxTimeS" });
  const prior = options.prior;
  if (prior !== undefined && !(prior.bytesPerSample >= 0 && prior.fixedBytes >= 0)) {
    throw new InputError("fixedBytes and bytesPerSample must be non-negative", { field: "prior" });
  }
}

/**
 * Knobs as `a=1 b=x`, for notes.
 *
 * @example
 * ```ts
 * describeKnobs({ batch_size: 32, precision: "bf16-mixed" }); // "batch_size=32 precision=bf16-mixed"
 * ```
 */
export function describeKnobs(knobs: Knobs): string {
  return Object.entries(knobs)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(" ");
}

/**
 * A share as a percentage with sensible digits.
 *
 * @example
 * ```ts
 * pct(0.0213); // "2.1 %"
 * ```
 */
export function pct(share: number): string {
  const p = share * 100;
  return `${Math.abs(p) >= 10 ? p.toFixed(0) : p.toFixed(1)} %`;
}

/**
 * Samples per second for notes.
 *
 * @example
 * ```ts
 * rate(1234.5); // "1235 samples/s"
 * ```
 */
export function rate(samplesPerSecond: number): string {
  return `${samplesPerSecond >= 100 ? samplesPerSecond.toFixed(0) : samplesPerSecond.toPrecision(3)} samples/s`;
}
