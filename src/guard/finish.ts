/**
 * How the guard closes a run, without I/O: what a failure of brim itself stops the job with, the
 * event of refused channel connections, and the end's message after an out-of-memory round or a
 * lost record.
 *
 * @module
 */
import type { Knobs } from "./oom-restart.ts";
import type { JobResult } from "../job/runner.ts";
import type { StoreLoss } from "../record/writer.ts";
import type { TimelineEntry } from "../record/types.ts";
import { BrimError } from "../errors/index.ts";
import { ioCause } from "../files.ts";

/**
 * Why brim stops the job when its own guard failed: a store it cannot write, or any other failure.
 *
 * @example
 * ```ts
 * guardFailure(new Error("boom")); // { reason: "guard_failed", detail: "brim's guard failed: boom" }
 * ```
 */
export function guardFailure(error: unknown): { reason: "store_failed" | "guard_failed"; detail: string } {
  const io = error instanceof BrimError ? error.code === "E_IO" : typeof (error as NodeJS.ErrnoException | undefined)?.code === "string";
  const why = error instanceof BrimError ? error.message : ioCause(error);
  if (io) return { reason: "store_failed", detail: error instanceof BrimError ? why : `an I/O error while guarding the job: ${why}` };
  return { reason: "guard_failed", detail: `brim's guard failed: ${why}` };
}

/**
 * The event saying the SDK channel refused or closed connections, or null when it did neither.
 *
 * @example
 * ```ts
 * channelRefusedEntry(result)?.event; // "channel_refused"
 * ```
 */
export function channelRefusedEntry(result: JobResult): TimelineEntry | null {
  const { refused, overflowed, admittedByPid } = result.channel;
  if (refused === 0 && overflowed === 0) return null;
  return {
    t: result.endedAt,
    kind: "event",
    event: "channel_refused",
    pid: null,
    step: null,
    message: `the SDK channel refused ${refused} connection(s) from outside the job and closed ${overflowed} that sent more than it holds`,
    details: { refused, overflowed, admitted_by_pid: admittedByPid },
  };
}

/**
 * The result whose end names the knobs brim chose after a rank ran out of memory (`decided`), when
 * the run did not end well.
 *
 * @example
 * ```ts
 * withOomAdvice(result, { batch_size: 16 }).end.message; // "...: --knob batch_size=16 (run again with them, ...)"
 * ```
 */
export function withOomAdvice(result: JobResult, decided: Knobs | null): JobResult {
  if (decided === null || result.end.cause === "ok") return result;
  const flags = Object.entries(decided)
    .map(([name, value]) => `--knob ${name}=${String(value)}`)
    .join(" ");
  const message = `${result.end.message}; a rank ran out of memory and brim chose for every rank: ${flags} (run again with them, or let the launcher restart the ranks: torchrun --max-restarts 1)`;
  return { ...result, end: { ...result.end, message } };
}

/**
 * The result whose end says the record is incomplete, when the store lost entries or lines.
 *
 * @example
 * ```ts
 * withStoreLoss(result, writer.loss).end.cause; // "store_failed" after a loss
 * ```
 */
export function withStoreLoss(result: JobResult, loss: StoreLoss | null): JobResult {
  if (loss === null) return result;
  const end =
    result.end.cause === "store_failed"
      ? result.end
      : { ...result.end, cause: "store_failed" as const, message: `${loss.error.message}; the record is incomplete` };
  return {
    ...result,
    end: { ...end, message: `${end.message} (${loss.entriesLost} timeline entries and ${loss.outputLinesLost} output lines not recorded)` },
  };
}
