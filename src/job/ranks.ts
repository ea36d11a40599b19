/**
 * The job's stepping processes, one per rank under torchrun / accelerate / DeepSpeed: when each
 * last stepped, whether all of them stalled (a collective hang) and the stacks of every one before
 * brim ends them.
 *
 * @module
 */
import { existsSync, readdirSync, readFileSync, rmdirSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import type { ChannelMessage } from "./channel.ts";
import { catchesSignal } from "./processes.ts";

/** One process that said hello as the job's main process (a rank, or the only one). */
export interface Stepper {
  pid: number;
  rank: number | null;
  localRank: number | null;
  steps: number;
  lastStepAt: number | null;
}

/** A stall: every stepping process quiet for `quietS` seconds. */
export interface Stall {
  quietS: number;
  steppers: Stepper[];
}

/** One process's stacks, dumped on brim's request (faulthandler, see python/_brim_boot). */
export interface StackDump {
  pid: number;
  rank: number | null;
  /** the dump file, null when the process could not dump (no handler, or it wrote nothing in time) */
  file: string | null;
  /** the innermost frame of its main thread, e.g. `File "train.py", line 20 in train_step` */
  top: string | null;
}

const finite = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/**
 * Follows the processes that step: each rank's steps and its last step's time.
 *
 * @example
 * ```ts
 * const ranks = new Steppers();
 * ranks.message({ v: 1, type: "hello", t: 1, pid: 10, role: "main", rank: 0 }, 1);
 * ranks.message({ v: 1, type: "step", t: 2, pid: 10 }, 2);
 * ranks.stalled(40, 30)?.quietS; // 38
 * ```
 */
export class Steppers {
  readonly #byPid = new Map<number, Stepper>();

  /** Takes a channel message received at `now` (Unix seconds). */
  message(message: ChannelMessage, now: number): void {
    if (message.type === "hello") {
      if (message.role !== "main" || this.#byPid.has(message.pid)) return;
      const rank = finite(message.rank) ? message.rank : null;
      const localRank = finite(message.local_rank) ? message.local_rank : null;
      this.#byPid.set(message.pid, { pid: message.pid, rank, localRank, steps: 0, lastStepAt: null });
    } else if (message.type === "event" && message.kind === "rank_known") {
      // a launcher that sets no RANK (Lightning's own DDP): the rank comes once the process group exists
      const details = (typeof message.details === "object" && message.details !== null ? message.details : {}) as Record<string, unknown>;
      const s = this.#byPid.get(message.pid);
      if (s !== undefined && s.rank === null && finite(details.rank)) {
        s.rank = details.rank;
        s.localRank ??= finite(details.local_rank) ? details.local_rank : null;
      }
    } else if (message.type === "step") {
      let s = this.#byPid.get(message.pid);
      if (s === undefined) this.#byPid.set(message.pid, (s = { pid: message.pid, rank: null, localRank: null, steps: 0, lastStepAt: null }));
      s.steps++;
      s.lastStepAt = now;
    }
  }

  /** How many processes said hello with a rank. */
  get ranks(): number {
    let n = 0;
    for (const s of this.#byPid.values()) if (s.rank !== null) n++;
    return n;
  }

  /** The processes that stepped, by rank then pid. */
  /** Every main process that said hello or stepped. */
  get known(): Stepper[] {
    return [...this.#byPid.values()];
  }

  get stepping(): Stepper[] {
    return [...this.#byPid.values()].filter((s) => s.lastStepAt !== null).sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9) || a.pid - b.pid);
  }

  /** All stepping processes quiet for at least `seconds` at `now`; null while any stepped since, or none ever did. */
  stalled(now: number, seconds: number): Stall | null {
    const steppers = this.stepping;
    if (steppers.length === 0) return null;
    const last = Math.max(...steppers.map((s) => s.lastStepAt as number));
    const quietS = now - last;
    return quietS >= seconds ? { quietS, steppers } : null;
  }
}

/**
 * The one-line account of a stall, e.g. "all 2 ranks stalled: no training step on any rank for
 * 31 s (limit 30 s); rank 0 at step 12, rank 1 at step 12".
 *
 * @example
 * ```ts
 * describeStall({ quietS: 31, steppers: [{ pid: 1, rank: 0, localRank: 0, steps: 12, lastStepAt: 5 }] }, 30);
 * ```
 */
export function describeStall(stall: Stall, limitS: number): string {
  const ranked = stall.steppers.filter((s) => s.rank !== null);
  const quiet = `${stall.quietS.toFixed(0)} s (limit ${limitS} s)`;
  if (ranked.length < 2) return `no training step for ${quiet} after step ${Math.max(...stall.steppers.map((s) => s.steps))}`;
  const where = ranked.map((s) => `rank ${s.rank} at step ${s.steps}`).join(", ");
  return `all ${ranked.length} ranks stalled: no training step on any rank for ${quiet}; ${where}`;
}

/**
 * The signal that asks a process for its stacks: SIGRTMIN+6 on Linux (glibc's SIGRTMIN is 34), a
 * real-time signal none of the frameworks brim supports uses, where SIGUSR1 is taken (Lightning requeues a SLURM job on it).
 * brim passes it as BRIM_STACKS_SIGNAL, so the job registers the same number.
 */
export const STACK_SIGNAL = 40;

/** The path a process's stack dump goes to; python/_brim_boot/sitecustomize.py writes the same name. */
export const stackFile = (dir: string, pid: number): string => join(dir, `stacks-${pid}.txt`);

/**
 * The innermost frame of the main thread in a faulthandler dump (threads come newest first, so the
 * main thread is the last block).
 *
 * @example
 * ```ts
 * topFrame('Current thread 0x1 (most recent call first):\n  File "t.py", line 3 in f\n  File "t.py", line 9 in <module>\n');
 * // 'File "t.py", line 3 in f'
 * ```
 */
export function topFrame(dump: string): string | null {
  const blocks = dump.split(/^(?=(?:Current thread|Thread) 0x)/m).filter((b) => /most recent call first/.test(b));
  const last = blocks[blocks.length - 1];
  return (
    last
      ?.split("\n")
      .find((l) => l.trim().startsWith("File "))
      ?.trim() ?? null
  );
}

const sizeOf = (file: string): number => {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
};

/**
 * Asks each process to dump its Python stacks ({@link STACK_SIGNAL}, only to a process that catches it: the
 * default action would end it) and waits up to `waitMs` for the dumps to settle.
 *
 * @example
 * ```ts
 * const dumps = await dumpStacks(stall.steppers, join(runDir, "stacks"));
 * ```
 */
export async function dumpStacks(steppers: readonly Pick<Stepper, "pid" | "rank">[], dir: string, waitMs = 3000): Promise<StackDump[]> {
  const asked = steppers.filter((s) => {
    if (!catchesSignal(s.pid, STACK_SIGNAL)) return false;
    try {
      process.kill(s.pid, STACK_SIGNAL);
      return true;
    } catch {
      return false;
    }
  });
  const sizes = new Map<number, number>();
  const deadline = Date.now() + waitMs;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const now = asked.map((s) => sizeOf(stackFile(dir, s.pid)));
    const settled = now.every((n, i) => n > 0 && n === sizes.get(asked[i]?.pid ?? -1));
    asked.forEach((s, i) => sizes.set(s.pid, now[i] ?? 0));
    if (settled || Date.now() >= deadline) break;
  }
  return steppers.map((s) => {
    const file = stackFile(dir, s.pid);
    if ((sizes.get(s.pid) ?? 0) === 0) return { pid: s.pid, rank: s.rank, file: null, top: null };
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {
      return { pid: s.pid, rank: s.rank, file: null, top: null };
    }
    return { pid: s.pid, rank: s.rank, file, top: topFrame(text) };
  });
}

/**
 * Removes the empty dump files (every Python process of the job opens one; only a stalled one
 * writes to it), and the folder when nothing is left in it.
 *
 * @example
 * ```ts
 * tidyStacks(join(runDir, "stacks"));
 * ```
 */
export function tidyStacks(dir: string): void {
  if (!existsSync(dir)) return;
  try {
    for (const name of readdirSync(dir)) if (/^stacks-\d+\.txt$/.test(name) && sizeOf(join(dir, name)) === 0) unlinkSync(join(dir, name));
    if (readdirSync(dir).length === 0) rmdirSync(dir);
  } catch {
    // a dump being written, or the folder gone: nothing to tidy
  }
}
