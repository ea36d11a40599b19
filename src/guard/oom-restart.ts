/**
 * Restart-based recovery from running out of memory in a job of two or more ranks: a rank that runs
 * out exits with the attach's code (python/brim/_ranks.py) and names the knobs it ran with; brim
 * decides the next round's micro-batch once, for every rank, keeping the samples per optimizer step,
 * and writes it where every rank of the launcher's next round reads it (BRIM_KNOBS_FILE).
 *
 * @module
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import type { ChannelMessage } from "../job/channel.ts";
import { ACCUMULATION_KNOB, MICRO_BATCH_KNOB } from "../knobs/index.ts";
import type { TimelineEntry } from "../record/types.ts";

/** A job's knobs, as `--knob` gives them. */
export type Knobs = Record<string, number | string | boolean>;

/** What to do after a rank ran out of memory with `ran`: new knobs, or why there are none. */
export type OomPlan = { knobs: Knobs; message: string } | { reason: string } | { already: true };

const positiveInt = (v: unknown): number | null => (typeof v === "number" && Number.isInteger(v) && v > 0 ? v : null);

/**
 * The next round's knobs after a rank ran out of memory with `ran` while brim's current decision is
 * `current`: the largest micro-batch at most half of it that divides the samples per optimizer step
 * (micro-batch × accumulation), with the accumulation that keeps them. `already` when `current`
 * holds a smaller micro-batch (another rank of the same round ran out first).
 *
 * @example
 * ```ts
 * smallerMicroBatch({ batch_size: 32, accumulation: 1 }, { batch_size: 32 });
 * // { knobs: { batch_size: 16, accumulation: 2 }, message: "..." }
 * ```
 */
export function smallerMicroBatch(ran: Knobs, current: Knobs): OomPlan {
  const micro = positiveInt(ran[MICRO_BATCH_KNOB]);
  if (micro === null)
    return { reason: `the job reads no ${MICRO_BATCH_KNOB} knob brim could lower (brim run --knob ${MICRO_BATCH_KNOB}=N, read with brim.knob)` };
  const now = positiveInt(current[MICRO_BATCH_KNOB]);
  if (now !== null && now < micro) return { already: true };
  const accumulation = positiveInt(ran[ACCUMULATION_KNOB]) ?? 1;
  const perStep = micro * accumulation;
  let next = Math.floor(micro / 2);
  while (next > 1 && perStep % next !== 0) next--;
  if (next < 1) return { reason: `a micro-batch of ${micro} ran out of memory and there is none smaller` };
  const knobs: Knobs = { ...current, [MICRO_BATCH_KNOB]: next, [ACCUMULATION_KNOB]: perStep / next };
  return {
    knobs,
    message: `the next round runs ${MICRO_BATCH_KNOB} ${next} × ${ACCUMULATION_KNOB} ${perStep / next} on every rank (was ${micro} × ${accumulation}: the same ${perStep} samples per optimizer step and rank)`,
  };
}

/**
 * Follows the job's `oom_exit` events and writes each decision to `file` (temp + rename: a rank
 * never reads half a file); returns the timeline entry that records it, or null for other messages.
 *
 * @example
 * ```ts
 * const restart = new OomRestart(join(runDir, "knobs.json"), { batch_size: 32 });
 * const entry = restart.message(message);
 * if (entry) writer.append(entry);
 * ```
 */
export class OomRestart {
  readonly #file: string;
  #current: Knobs;
  #rounds = 0;

  constructor(file: string, knobs: Knobs) {
    this.#file = file;
    this.#current = { ...knobs };
  }

  /** How many times brim lowered the micro-batch. */
  get rounds(): number {
    return this.#rounds;
  }

  message(message: ChannelMessage): TimelineEntry | null {
    if (message.type !== "event" || message.kind !== "oom_exit") return null;
    const details = (typeof message.details === "object" && message.details !== null ? message.details : {}) as Record<string, unknown>;
    const ran = (typeof details.knobs === "object" && details.knobs !== null ? details.knobs : {}) as Knobs;
    const rank = typeof details.rank === "string" || typeof details.rank === "number" ? String(details.rank) : "?";
    const plan = smallerMicroBatch(ran, this.#current);
    if ("already" in plan) return null;
    const t = Date.now() / 1000;
    const step = typeof message.step === "number" ? message.step : null;
    if ("reason" in plan)
      return {
        t,
        kind: "event",
        event: "oom_restart_impossible",
        pid: message.pid,
        step,
        message: `rank ${rank} ran out of memory; ${plan.reason}`,
        details: { rank, knobs: ran },
      };
    try {
      writeFileSync(`${this.#file}.tmp`, `${JSON.stringify(plan.knobs)}\n`, { mode: 0o600 });
      renameSync(`${this.#file}.tmp`, this.#file);
    } catch (error) {
      return {
        t,
        kind: "event",
        event: "oom_restart_impossible",
        pid: message.pid,
        step,
        message: `rank ${rank} ran out of memory; brim could not write ${this.#file}: ${(error as Error).message}`,
        details: { rank, knobs: ran },
      };
    }
    this.#current = plan.knobs;
    this.#rounds++;
    return {
      t,
      kind: "event",
      event: "oom_restart_planned",
      pid: message.pid,
      step,
      message: `rank ${rank} ran out of memory at step ${step ?? "?"}; ${plan.message}, if the launcher restarts them (torchrun --max-restarts)`,
      details: { rank, ran, knobs: plan.knobs, file: this.#file },
    };
  }

  /** The knobs brim decided last, read back (null when it wrote none). */
  written(): Knobs | null {
    try {
      return JSON.parse(readFileSync(this.#file, "utf8")) as Knobs;
    } catch {
      return null;
    }
  }
}
