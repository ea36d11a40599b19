/**
 * The job runner's types: how to start a job, and how it ended.
 *
 * @module
 */
import type { RunEnd } from "../record/types.ts";
import type { ChannelMessage, ChannelStats } from "./channel.ts";

/** How to start a job. */
export interface JobOptions {
  command: readonly string[];
  cwd?: string;
  /** The environment to start from (default: brim's own). */
  baseEnv?: NodeJS.ProcessEnv;
  /** Extra variables, applied last. */
  env?: Record<string, string>;
  runId: string;
  /** The secret an SDK sends in its hello (`token`) to be admitted on the channel; Job.start makes one. */
  channelToken?: string;
  knobs?: Record<string, unknown>;
  stepBudget?: number | null;
  warmupSteps?: number | null;
  /** GPU cap in bytes passed to the SDK (`BRIM_MEMORY_CAP_BYTES`); RAM caps are enforced from outside. */
  gpuCapBytes?: number | null;
  /** The card's memory, to turn a GPU cap into JAX's memory fraction. */
  gpuTotalBytes?: number | null;
  /** Seconds between SIGTERM and SIGKILL when brim stops the job. Default 10. */
  killGraceS?: number;
  /** Seconds without a new step (after the first) before the job counts as hung; null = never. */
  hungAfterS?: number | null;
  /**
   * With two or more ranks (torchrun, accelerate, DeepSpeed): seconds with no step on any rank before
   * brim dumps every rank's stacks and ends the ranks; default `hungAfterS`.
   */
  rankHangAfterS?: number | null;
  /** The folder where each process dumps its Python stacks when the job stalls (faulthandler on a real-time signal, see ranks.ts); none without it. */
  stacksDir?: string;
  /** Append brim's bundled SDK to PYTHONPATH (default true). */
  bundledSdk?: boolean;
  /** Attach to an unmodified Python job (default true; `BRIM_ATTACH=0` in the environment also turns it off). */
  attach?: boolean;
  /** The user's pattern for progress lines (`--progress-pattern`; default: `BRIM_PROGRESS_PATTERN` in the job's environment). */
  progressPattern?: string;
  onMessage?: (message: ChannelMessage) => void;
  /** Each complete line of output (`\r` updates folded to what the line finally shows), for the record. */
  onOutput?: (stream: 1 | 2, line: string) => void;
  /** The output as it comes, `\r` updates and partial lines included, for passing through. */
  onChunk?: (stream: 1 | 2, chunk: string) => void;
  /** The output's bytes as they come, before decoding (pipes only; a pseudo-terminal gives text): byte-exact pass-through. */
  onBytes?: (stream: 1 | 2, bytes: Buffer) => void;
  /**
   * Run the job on a pseudo-terminal of this size (when brim itself is on one), so that it prints
   * progress bars and colours as it would in the shell; stdout and stderr then arrive as one stream
   * (1). Falls back to pipes where node-pty is not installed or the command is not found.
   */
  pty?: PtySize | null;
}

/**
 * The size of the job's pseudo-terminal; `current`, when given, is read again on SIGWINCH so the job
 * follows a resized terminal.
 *
 * @example
 * ```ts
 * const size: PtySize = { columns: 120, rows: 40, current: () => ({ columns: process.stdout.columns, rows: process.stdout.rows }) };
 * ```
 */
export interface PtySize {
  columns: number;
  rows: number;
  current?: () => { columns: number; rows: number };
}

/** How a job ended, with what brim saw of it. */
export interface JobResult {
  end: RunEnd;
  pid: number;
  startedAt: number;
  endedAt: number;
  tail: string[];
  channel: ChannelStats;
  steps: number;
  /** the signal brim received and passed to the job (Ctrl-C: SIGINT), when the user interrupted it */
  interruptedBy: NodeJS.Signals | null;
}
