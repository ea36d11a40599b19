/**
 * Whether the job's evaluation ran inside the trials whose memory was measured. A job that evaluates
 * (a validation loop, the Trainer's eval step) may hold more memory there than in training, and a
 * trial's short window may end before its first evaluation: then the peak of the winner's trials says
 * nothing of it. The evidence is the attach's (loaders.ts): a loader seen fetched with gradients off
 * and not trained on ("eval" use), or a loader built but never iterated beside one that trained. No
 * evidence, no line: a job that does not evaluate is not told about evaluation.
 *
 * @example
 * ```ts
 * const seen = trialEvaluation(loaders); // { ran: true, where: "train.py:31" }
 * tuneEvaluation(record.trials, record.winner?.knobs ?? null)?.line; // "evaluation ran in the trials (…): its memory is in the peak"
 * ```
 * @module
 */
import type { TuneRecord, TuneTrialRecord } from "../record/types.ts";
import type { LoaderSeen } from "../knobs/index.ts";
import { knobsKey } from "./strategies/axis.ts";
import type { Knobs } from "./types.ts";

/** A trial's evaluation, as the attach saw it: ran (an eval loader fed batches), or built and never used. */
export interface TrialEvaluation {
  ran: boolean;
  /** file:line of the evaluation loader (the one that ran, else the one never used), when the attach said */
  where: string | null;
}

/** The tune's evaluation line, as tune.json keeps it. */
export type TuneEvaluation = NonNullable<TuneRecord["evaluation"]>;

/**
 * What a trial's loaders say of evaluation: ran when one was seen in evaluation; not seen when one was
 * built and never iterated while another trained; null with no evidence of evaluation.
 *
 * @example
 * ```ts
 * trialEvaluation([{ where: "t.py:30", use: "train", ... }, { where: "t.py:31", use: null, ... }]); // { ran: false, where: "t.py:31" }
 * ```
 */
export function trialEvaluation(loaders: readonly Pick<LoaderSeen, "where" | "use">[]): TrialEvaluation | null {
  const ran = loaders.find((loader) => loader.use === "eval");
  if (ran !== undefined) return { ran: true, where: ran.where };
  const unused = loaders.find((loader) => loader.use == null);
  if (unused !== undefined && loaders.some((loader) => loader.use === "train")) return { ran: false, where: unused.where };
  return null;
}

const place = (where: string): string => where.split("/").slice(-2).join("/");
const list = (indices: readonly number[]): string => `trial${indices.length === 1 ? "" : "s"} ${indices.join(", ")}`;

/**
 * The verdict's evaluation line: whether evaluation ran in the trials of the configuration the tune
 * ends with (`ending`: the winner's knobs, else your configuration's, trial 0), so that its memory is
 * in their peak; null when no trial showed evidence of evaluation.
 *
 * @example
 * ```ts
 * tuneEvaluation(trials, { batch_size: 64 }); // { ran: false, trials: [0], line: "evaluation was not seen in the trials: …" }
 * ```
 */
export function tuneEvaluation(trials: readonly TuneTrialRecord[], ending: Knobs | null): TuneEvaluation | null {
  if (!trials.some((trial) => trial.evaluation != null)) return null;
  const key = knobsKey(ending ?? trials.find((trial) => trial.index === 0)?.knobs ?? {});
  const ranIn = trials.filter((trial) => trial.evaluation?.ran === true).map((trial) => trial.index);
  const mine = trials.filter((trial) => knobsKey(trial.knobs) === key);
  const ran = mine.some((trial) => trial.evaluation?.ran === true);
  if (ran) return { ran, trials: ranIn, line: `evaluation ran in the trials (${list(ranIn)}): its memory is in the peak` };
  const where = trials.find((trial) => trial.evaluation?.where != null)?.evaluation?.where ?? null;
  const whose = ending === null ? "your configuration's" : "the winner's";
  const elsewhere = ranIn.length > 0 ? ` (it ran in ${list(ranIn)}, not at these settings)` : "";
  const loader =
    where === null ? "an evaluation loader was built but never iterated in a trial" : `the loader at ${place(where)} was built but never iterated there`;
  return {
    ran,
    trials: ranIn,
    line: `evaluation was not seen in the trials: its memory at ${whose} settings was not measured${elsewhere}; ${loader} — let the trials reach it (a longer --window or more --steps, and --trial-time to match) or make the job evaluate sooner while tuning, then tune again`,
  };
}
