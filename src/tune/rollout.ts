/**
 * The rollouts of a reinforcement-learning job as a trial's steps show them. A PPO job collects a
 * rollout between two updates, so the update after it takes the rollout's time too (the attach counts
 * a step per optimizer step, or per batch of the rollout's DataLoader): those steps stand far above
 * the median step. Pure: a trial's step durations in, the rollouts' share of the time and how often
 * they come out.
 *
 * @example
 * ```ts
 * rolloutShare([0.01, 0.01, 0.01, 0.31, 0.01, 0.01, 0.01, 0.31]);
 * // { share: 0.88, steps: 2, measured: 8, period: 4 }
 * ```
 * @module
 */
import { knobSpec, type KnobValue } from "../knobs/index.ts";
import { median } from "../stats.ts";

/** A step at least this many times the median step is one that collected a rollout (or did other work between updates). */
export const ROLLOUT_STEP = 2;
/** Below this share of the time measured in rollout steps, with a rollout measured, more environments or longer rollouts cannot pay. */
export const ROLLOUT_MIN = 0.05;
/** A step at least this share of the longest is one of the rollouts when they are counted for their period (a step twice the median on a busy machine is not). */
export const ROLLOUT_OF_LONGEST = 0.5;

/** The rollouts among a trial's steps. */
export interface RolloutEvidence {
  /** the time beyond the median step in the steps at least {@link ROLLOUT_STEP} times it, as a share of all steps' time */
  share: number;
  /** how many such steps */
  steps: number;
  /** the steps measured */
  measured: number;
  /** the updates from one rollout to the next: the steps measured over the steps at least {@link ROLLOUT_OF_LONGEST} of the longest among those; null with none */
  period: number | null;
}

/**
 * The rollouts among the steps measured (see the module); null with fewer than 3 steps.
 *
 * @example
 * ```ts
 * rolloutShare([0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.31]); // { share: 0.79, steps: 1, measured: 8, period: 8 } (0.30 of 0.38 s)
 * rolloutShare([0.01, 0.012, 0.011]); // { share: 0, steps: 0, measured: 3, period: null }
 * ```
 */
export function rolloutShare(stepSeconds: readonly number[]): RolloutEvidence | null {
  const typical = median(stepSeconds);
  const total = stepSeconds.reduce((sum, s) => sum + s, 0);
  if (stepSeconds.length < 3 || typical === null || total <= 0) return null;
  const long = stepSeconds.filter((s) => s >= ROLLOUT_STEP * typical);
  const longest = Math.max(...long, 0);
  const rollouts = long.filter((s) => s >= ROLLOUT_OF_LONGEST * longest).length;
  return {
    share: long.reduce((sum, s) => sum + (s - typical), 0) / total,
    steps: long.length,
    measured: stepSeconds.length,
    period: rollouts === 0 ? null : stepSeconds.length / rollouts,
  };
}

/**
 * The values of a knob that spaces the rollouts out (`periodGrows`: the updates from one rollout to
 * the next grow with it) whose trials would still hold a rollout: where one would come less often than
 * once in the steps a trial measures, its trial would read as fast for leaving the rollout out, so it is
 * not tried, and `why` says so. A knob that holds its product with the rollout length
 * (`num_envs` beside `rollout_steps`) keeps the period, and keeps every value.
 *
 * @example
 * ```ts
 * measurableValues("rollout_steps", [32, 64, 128, 256, 512], { share: 0.6, steps: 2, measured: 64, period: 32 }, { num_envs: 4, rollout_steps: 128 });
 * // { values: [32, 64, 128, 256], why: "rollout_steps=512 not tried: a rollout would come every ≈128 updates there, ..." }
 * ```
 */
export function measurableValues(
  knob: string,
  values: KnobValue[],
  rollout: RolloutEvidence | null | undefined,
  knobs: Readonly<Record<string, KnobValue>>,
): { values: KnobValue[]; why: string | null } {
  const spec = knobSpec(knob);
  const current = knobs[knob];
  const period = rollout?.period ?? null;
  const held = spec?.holds !== undefined && knobs[spec.holds.knob] !== undefined;
  if (spec?.periodGrows !== true || held || rollout == null || period === null || typeof current !== "number" || current <= 0) return { values, why: null };
  const every = (v: KnobValue): number => (period * Number(v)) / current;
  const dropped = values.filter((v) => typeof v === "number" && every(v) > rollout.measured);
  if (dropped.length === 0) return { values, why: null };
  const longest = Math.max(...dropped.map(Number));
  return {
    values: values.filter((v) => !dropped.includes(v)),
    why: `${knob}=${dropped.map(String).join(", ")} not tried: a rollout would come every ≈${Math.round(every(longest))} updates there, more than the ${rollout.measured} steps a trial measures (a trial with no rollout in it reads as fast)`,
  };
}
