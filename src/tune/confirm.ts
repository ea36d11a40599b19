/**
 * The confirmation of a winner: before a speedup is printed, the winner and the baseline are measured
 * again, interleaved (A/B/A/B, so that a machine growing busier or quieter weighs on both alike), and
 * the speedup is the ratio of their geometric means with a 95 % interval. The noise of one trial is
 * pooled from these repeats and every repeat of one configuration in the search (log throughput,
 * residuals from each configuration's mean), never under the within-trial error. An interval that
 * holds 1.0 is no gain beyond noise; an interval wholly below 1.0 is a measured slowdown: your
 * configuration is faster (never "noise").
 *
 * @example
 * ```ts
 * confirmSpeedup([100, 104], [130, 126], []).verdict; // "confirmed"
 * ```
 * @module
 */
import type { TuneRecord } from "../record/types.ts";
import type { Knobs, TrialResult } from "./types.ts";
import { mean as meanOf } from "../stats.ts";
import { REPEATS_DF } from "./strategies/noise.ts";
import { rateLabel } from "./window.ts";

/** A/B pairs measured to confirm a winner, at least and at most (more while the interval holds 1.0 and time allows). */
export const CONFIRM_PAIRS = 2;
export const CONFIRM_PAIRS_MAX = 3;

/** What the interleaved measurements say of the winner against the baseline. */
export type ConfirmVerdict = "confirmed" | "slower" | "no_gain";

/**
 * The verdict of a 95 % interval on winner / baseline: above 1.0 confirmed, wholly below 1.0 slower
 * (a measured slowdown is not noise), holding 1.0 no gain beyond noise.
 *
 * @example
 * ```ts
 * intervalVerdict(0.25, 0.41); // "slower"
 * ```
 */
export function intervalVerdict(low: number, high: number): ConfirmVerdict {
  if (low > 1) return "confirmed";
  if (high < 1) return "slower";
  return "no_gain";
}

/** The confirmed speedup of a winner over the baseline. */
export interface Confirmation {
  /** confirmed: the interval lies above 1; slower: it lies wholly under 1 (yours is faster); no_gain: it holds 1 */
  verdict: ConfirmVerdict;
  /** winner / baseline, ratio of the geometric means of the interleaved measurements */
  speedup: number;
  low: number;
  high: number;
  /** relative noise of one trial (pooled) and its degrees of freedom */
  noise: number;
  df: number;
  baselineRates: number[];
  winnerRates: number[];
}

// two-sided 95 % quantiles of Student's t, df 1..30; beyond, the normal's 1.96 plus a small correction
const T975 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069,
  2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/**
 * The 97.5 % quantile of Student's t with `df` degrees of freedom.
 *
 * @example
 * ```ts
 * tQuantile975(4); // 2.776
 * ```
 */
export function tQuantile975(df: number): number {
  if (df < 1) return Infinity;
  const whole = Math.floor(df);
  return T975[whole - 1] ?? 1.96 + 2.4 / whole;
}

const mean = (values: readonly number[]): number => meanOf(values) ?? NaN;

/**
 * The speedup of the winner over the baseline from interleaved measurements, with its 95 % interval.
 * `repeats`: other groups of throughputs of one configuration each (the search's re-measures), pooled
 * into the noise estimate until the interleaved measurements have {@link REPEATS_DF} degrees of
 * freedom of their own (three pairs), then left out; `floorNoise`: the least relative noise assumed
 * (the within-trial error) while the groups used have fewer than {@link REPEATS_DF} degrees of
 * freedom; from there on their spread alone, with no floor under it (noise is measured, not assumed).
 *
 * @example
 * ```ts
 * const c = confirmSpeedup([100, 102], [120, 118], [[98, 101]], 0.01);
 * c.speedup; // ≈ 1.18
 * c.verdict; // "confirmed"
 * ```
 */
export function confirmSpeedup(
  baselineRates: readonly number[],
  winnerRates: readonly number[],
  repeats: readonly (readonly number[])[],
  floorNoise = 0,
): Confirmation {
  const logs = (values: readonly number[]): number[] => values.filter((v) => v > 0).map(Math.log);
  const a = logs(baselineRates);
  const b = logs(winnerRates);
  const pooled = (groups: readonly number[][]): { squares: number; df: number } => {
    let squares = 0;
    let df = 0;
    for (const group of groups) {
      if (group.length < 2) continue;
      const m = mean(group);
      squares += group.reduce((s, x) => s + (x - m) ** 2, 0);
      df += group.length - 1;
    }
    return { squares, df };
  };
  // the interleaved pairs share their conditions; the search's re-measures were taken earlier, and a
  // drift of the host since (seen: ×1.6 between two re-measures of one configuration on a shared box)
  // is not noise of this comparison: once the pairs have enough degrees of freedom they stand alone
  const own = pooled([a, b]);
  const { squares, df } = own.df >= REPEATS_DF ? own : pooled([a, b, ...repeats.map(logs)]);
  const diff = a.length > 0 && b.length > 0 ? mean(b) - mean(a) : 0;
  // the repeats measure the noise between trials; the within-trial error stands in for it only while they are few
  const noise = Math.max(df >= REPEATS_DF ? 0 : floorNoise, df > 0 ? Math.sqrt(squares / df) : Infinity);
  const half = a.length > 0 && b.length > 0 ? tQuantile975(df) * noise * Math.sqrt(1 / a.length + 1 / b.length) : Infinity;
  const low = Math.exp(diff - half);
  const high = Math.exp(diff + half);
  return {
    verdict: intervalVerdict(low, high),
    speedup: Math.exp(diff),
    low,
    high,
    noise,
    df,
    baselineRates: [...baselineRates],
    winnerRates: [...winnerRates],
  };
}

/** How a confirmation trial's purpose names its side: your configuration (A) or the winner (B). */
const CONFIRM_ROLES = { A: "your configuration (A)", B: "the winner (B)" } as const;

/**
 * The side a confirmation trial measured, from its purpose: "A" (your configuration), "B" (the winner), or null for another trial.
 *
 * @example
 * ```ts
 * confirmRole("confirm 1/2: the winner (B), interleaved with your configuration"); // "B"
 * ```
 */
export function confirmRole(purpose: string): "A" | "B" | null {
  if (!purpose.startsWith("confirm ")) return null;
  return purpose.includes(CONFIRM_ROLES.A) ? "A" : purpose.includes(CONFIRM_ROLES.B) ? "B" : null;
}

/** Runs one trial of a configuration for the confirmation. */
export type ConfirmTrial = (knobs: Knobs, purpose: string) => Promise<TrialResult>;

/**
 * Measures the baseline and the winner interleaved, A/B/A/B, {@link CONFIRM_PAIRS} pairs and up to
 * {@link CONFIRM_PAIRS_MAX} while the interval still holds 1.0 and `moreTime()` says a pair fits.
 * A pair whose two trials did not both measure a throughput is left out of the speedup.
 *
 * @example
 * ```ts
 * const confirmation = await confirmWinner(baseline, winner, runTrialOf, [], 0.01, () => true);
 * ```
 */
export async function confirmWinner(
  baseline: Knobs,
  winner: Knobs,
  trial: ConfirmTrial,
  repeats: readonly (readonly number[])[],
  floorNoise: number,
  moreTime: () => boolean,
): Promise<Confirmation | null> {
  const a: number[] = [];
  const b: number[] = [];
  let current: Confirmation | null = null;
  for (let pair = 1; pair <= CONFIRM_PAIRS_MAX; pair++) {
    // a third pair only while the interval holds 1.0: a gain or a slowdown already measured is decided
    if (pair > CONFIRM_PAIRS && (current?.verdict !== "no_gain" || !moreTime())) break;
    const of = Math.max(pair, CONFIRM_PAIRS);
    const before = await trial(baseline, `confirm ${pair}/${of}: ${CONFIRM_ROLES.A}, interleaved with the winner`);
    if (before.end === "interrupted") return current;
    const after = await trial(winner, `confirm ${pair}/${of}: ${CONFIRM_ROLES.B}, interleaved with your configuration`);
    // a winner that spills once is not safe to apply, whatever its speed: no more pairs
    if (after.end === "interrupted" || after.end === "cap_exceeded") return current;
    if (before.end === "ok" && after.end === "ok" && before.samplesPerSecond !== null && after.samplesPerSecond !== null) {
      a.push(before.samplesPerSecond);
      b.push(after.samplesPerSecond);
    }
    if (a.length > 0) current = confirmSpeedup(a, b, repeats, floorNoise);
  }
  return current;
}

/** tune.json's confirmation: how the winner's speedup was measured, or why there is no gain. */
export type ConfirmationRecord = NonNullable<TuneRecord["confirmation"]>;

const deltaText = (knobs: Knobs, baseline: Knobs): string =>
  Object.entries(knobs)
    .filter(([knob, value]) => baseline[knob] !== value)
    .map(([knob, value]) => `${knob}=${String(value)}`)
    .join(" ");

/**
 * What the confirmation makes of the search's winner: confirmed (the winner keeps it, with the
 * interleaved speedup), slower (your configuration is faster, with the interval: no winner, nothing
 * to apply, not a failure), no gain beyond noise (no winner: nothing to apply, not a failure), or not
 * confirmed (its re-measures failed). Null when the search had no winner at all.
 *
 * @example
 * ```ts
 * const verdict = confirmationOutcome(record, confirmation, 0.03);
 * if (verdict !== null) { record.winner = verdict.winner; record.confirmation = verdict.confirmation; }
 * ```
 */
export function confirmationOutcome(
  record: Pick<TuneRecord, "winner" | "trials">,
  confirmation: Confirmation | null,
  noise: number | null,
): { winner: TuneRecord["winner"]; confirmation: ConfirmationRecord | null; advice: { reason: string; next: string } | null } | null {
  const winner = record.winner;
  if (winner === null) return null;
  const baseline = record.trials.find((trial) => trial.index === 0)?.knobs ?? {};
  const rates = `your configuration's ${rateLabel(record.trials.find((trial) => trial.index === 0)?.rate_unit)}`;
  const delta = deltaText(winner.knobs, baseline);
  const interval = (c: Confirmation): string => `×${c.speedup.toFixed(2)} (95 % interval ×${c.low.toFixed(2)}–×${c.high.toFixed(2)})`;
  const next =
    "your configuration is as fast as anything tried, within this machine's noise: nothing to apply (longer trials, --window 30s, tell smaller gains apart)";
  if (delta === "" && !record.trials.some((trial) => deltaText(trial.knobs, baseline) !== "")) {
    // the budget ran out on your configuration: "no gain" would claim a search that never happened
    return {
      winner: null,
      confirmation: null,
      advice: {
        reason: "nothing but your configuration was measured: the budget (trials or time) ran out before another configuration was tried",
        next: "give the tune more time (--max-time) or trials (--max-trials), or shorter trials (--window), and tune again",
      },
    };
  }
  if (delta === "") {
    const noiseText = noise !== null ? ` (±${(noise * 100).toFixed(1)} % a trial)` : "";
    return {
      winner: null,
      confirmation: { verdict: "no_gain", speedup: null, low: null, high: null, noise, df: null, baseline_rates: [], winner_rates: [] },
      advice: { reason: `no gain beyond noise: nothing tried beat your configuration beyond the measured noise${noiseText}`, next },
    };
  }
  const again = record.trials.filter(
    (trial) => trial.purpose.startsWith("confirm") && deltaText(trial.knobs, winner.knobs) === "" && deltaText(winner.knobs, trial.knobs) === "",
  );
  const spilled = again.filter((trial) => trial.end === "cap_exceeded");
  if (spilled.length > 0) {
    return {
      winner: null,
      confirmation: null,
      advice: {
        reason: `the best configuration found (${delta}) went over the cap in ${spilled.length} of its ${again.length} re-measure(s): it sits on the memory edge, so it is not safe to apply`,
        next: "tune again with --strategy brim (it keeps a margin under the cap) or a lower --cap",
      },
    };
  }
  if (confirmation === null) {
    return {
      winner: null,
      confirmation: null,
      advice: {
        reason: `the best configuration found (${delta}) could not be confirmed: its interleaved re-measures against your configuration gave no throughput`,
        next: "look at the confirm trials' ends and causes in the table, fix what they name, and tune again",
      },
    };
  }
  const kept: ConfirmationRecord = {
    verdict: confirmation.verdict,
    speedup: confirmation.speedup,
    low: confirmation.low,
    high: Number.isFinite(confirmation.high) ? confirmation.high : null,
    noise: Number.isFinite(confirmation.noise) ? confirmation.noise : null,
    df: confirmation.df,
    baseline_rates: confirmation.baselineRates,
    winner_rates: confirmation.winnerRates,
  };
  if (confirmation.verdict === "confirmed") return { winner: { ...winner, speedup: confirmation.speedup }, confirmation: kept, advice: null };
  const pairs = `interleaved A/B over ${confirmation.winnerRates.length} pair(s)`;
  if (confirmation.verdict === "slower") {
    // the search's pick measured slower than yours beyond the noise: a slowdown, said as one
    return {
      winner: null,
      confirmation: kept,
      advice: {
        reason: `your configuration is faster: the best configuration the search found (${delta}) measured ${interval(confirmation)} ${rates}, ${pairs}; the search picked it on noisier trials`,
        next: "keep your configuration: nothing to apply (the search's trials were noisier than this machine's pairs; longer trials, --window 30s or a quieter machine, decide more surely)",
      },
    };
  }
  return {
    winner: null,
    confirmation: kept,
    advice: {
      reason: `no gain beyond noise: the best configuration found (${delta}) measured ${interval(confirmation)} ${rates}, ${pairs}`,
      next,
    },
  };
}
