import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { BrimError } from "../errors/index.ts";
import { ChannelServer, type ChannelMessage } from "./channel.ts";
import { classifyEnd, oomInLine, type BrimStopReason, type OomKind } from "./classify.ts";
import { jobEnvironment } from "./environment.ts";
import { pipeOutput } from "./output-text.ts";
import { inProcessTree, reapGroup, signalGroup } from "./processes.ts";
import { parseProgressLine, progressPattern, ProgressSteps } from "./progress-lines.ts";
import { describeStall, dumpStacks, STACK_SIGNAL, Steppers, tidyStacks, type StackDump } from "./ranks.ts";
import { startCommand, type Exit, type Source, type Spawned } from "./spawn.ts";
import type { JobOptions, JobResult } from "./types.ts";

export { ATTACH_BOOT_PATH, BUNDLED_SDK_PATH, attachEnabled, jobEnvironment } from "./environment.ts";
export type { JobOptions, JobResult, PtySize } from "./types.ts";

const TAIL_LINES = 60;
/** Events by which the attach says it counts the job's steps (python/brim/_step_state.py). */
const ATTACH_COUNTS = new Set(["attach_on", "optimizer_built"]);

/**
 * A user's command running under brim: its own process group, the SDK channel, output passed on
 * line by line, signals forwarded, SIGKILL after a grace period, no processes left behind, and the
 * way it ended classified.
 *
 * @example
 * ```ts
 * const job = await Job.start({ command: ["python", "train.py"], runId: "r1", onOutput: (s, l) => console.log(l) });
 * process.on("SIGINT", () => job.interrupt("SIGINT"));
 * const result = await job.wait();
 * console.log(result.end.cause);
 * ```
 */
export class Job {
  readonly pid: number;
  readonly startedAt: number;
  readonly channel: ChannelServer;
  #child: Spawned;
  #options: JobOptions;
  #stoppedBy: BrimStopReason | null = null;
  #interrupts = 0;
  #interruptedBy: NodeJS.Signals | null = null;
  #streamsEnded: Promise<unknown>[] = [];
  #stopDetail: string | undefined;
  #sdkOomFatal = false;
  #oomLine: { kind: OomKind; line: string } | null = null;
  #gpuLost = false;
  #tail: string[] = [];
  #steps = 0;
  #channelSteps = 0;
  /** The attach counts this job's steps (a process built a torch model, or an optimizer): printed progress is none of them. */
  #attachCounts = false;
  #progress = new ProgressSteps();
  #pattern: RegExp | undefined;
  readonly #steppers = new Steppers();
  #stalled = false;
  #killTimer: NodeJS.Timeout | null = null;
  #hungTimer: NodeJS.Timeout | null = null;
  #done: Promise<JobResult>;

  private constructor(child: Spawned, sources: Source[], channel: ChannelServer, options: JobOptions, exited: Promise<Exit>, pattern: RegExp | undefined) {
    this.#child = child;
    this.#pattern = pattern;
    this.pid = child.pid;
    this.startedAt = Date.now() / 1000;
    this.channel = channel;
    this.#options = options;
    this.#pipe(sources, options);
    if (options.hungAfterS != null || options.rankHangAfterS != null) this.#watchForHang();
    this.#done = exited.then(async ({ code, signal }) => {
      const endedAt = Date.now() / 1000;
      await reapGroup(this.pid, (s) => this.#signalGroup(s));
      // 'exit' can come before the last output is read: the OOM traceback that decides the cause
      await Promise.race([Promise.all(this.#streamsEnded), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
      child.release();
      if (this.#killTimer) clearTimeout(this.#killTimer);
      if (this.#hungTimer) clearInterval(this.#hungTimer);
      await channel.close();
      if (options.stacksDir !== undefined) tidyStacks(options.stacksDir);
      const end = classifyEnd({
        exitCode: code,
        signal,
        stoppedBy: this.#stoppedBy,
        stopDetail: this.#stopDetail,
        sdkOomFatal: this.#sdkOomFatal,
        oomLine: this.#oomLine,
        gpuLost: this.#gpuLost,
      });
      return {
        end,
        pid: this.pid,
        startedAt: this.startedAt,
        endedAt,
        tail: [...this.#tail],
        channel: channel.stats,
        steps: this.#steps,
        interruptedBy: this.#interruptedBy,
      };
    });
  }

  /** Starts the command; `E_JOB_START` with a one-line cause when it cannot be started. */
  static async start(options: JobOptions): Promise<Job> {
    const [program] = options.command;
    if (program === undefined || program === "") throw new BrimError("E_USAGE", "no command to run: put it after --, e.g. brim run -- python train.py");
    const patternSource = options.progressPattern ?? options.env?.BRIM_PROGRESS_PATTERN ?? (options.baseEnv ?? process.env).BRIM_PROGRESS_PATTERN;
    let pattern: RegExp | undefined;
    try {
      pattern = patternSource === undefined || patternSource === "" ? undefined : progressPattern(patternSource);
    } catch (error) {
      throw new BrimError("E_USAGE", (error as Error).message, { cause: error });
    }
    const box: { job?: Job } = {};
    const pending: ChannelMessage[] = [];
    const token = options.channelToken ?? randomBytes(16).toString("hex");
    const channel = await ChannelServer.listen(
      (message) => {
        if (box.job) box.job.#onMessage(message);
        else pending.push(message);
      },
      { admission: { token, admitPid: (pid) => box.job !== undefined && inProcessTree(pid, box.job.pid) } },
    );
    const env = jobEnvironment({ ...options, channelToken: token }, channel.path);
    if (options.stacksDir !== undefined) {
      try {
        mkdirSync(options.stacksDir, { recursive: true, mode: 0o700 });
        env.BRIM_STACKS_DIR = options.stacksDir;
        env.BRIM_STACKS_SIGNAL = String(STACK_SIGNAL);
      } catch {
        // no stack dumps on a stall; the run goes on
      }
    }
    let started: Awaited<ReturnType<typeof startCommand>>;
    try {
      started = await startCommand(options.command, { env, cwd: options.cwd, pty: options.pty, onBytes: options.onBytes });
    } catch (error) {
      await channel.close();
      throw error;
    }
    const job = new Job(started.spawned, started.sources, channel, options, started.exited, pattern);
    box.job = job;
    for (const message of pending) job.#onMessage(message);
    return job;
  }

  /** Steps reported so far (all processes). */
  get steps(): number {
    return this.#steps;
  }

  /** Why brim stopped the job, if it did. */
  get stoppedBy(): BrimStopReason | null {
    return this.#stoppedBy;
  }

  /** Resolves when the job and everything it started are gone. */
  wait(): Promise<JobResult> {
    return this.#done;
  }

  /**
   * Passes a signal from the user (Ctrl-C, SIGTERM) to the job's process group; a second one, or the
   * grace period running out, sends SIGKILL.
   */
  interrupt(signal: NodeJS.Signals): void {
    this.#interrupts++;
    if (this.#interrupts > 1) {
      this.#signalGroup("SIGKILL");
      return;
    }
    if (this.#stoppedBy === null) {
      this.#stoppedBy = "interrupted";
      this.#interruptedBy = signal;
    }
    this.#signalGroup(signal);
    this.#escalateLater();
  }

  /** brim ends the job itself (over the cap, hung): SIGTERM to the group, SIGKILL after the grace period. */
  stop(reason: Exclude<BrimStopReason, "interrupted">, detail: string, graceS?: number): void {
    if (this.#stoppedBy !== null) return;
    this.#stoppedBy = reason;
    this.#stopDetail = detail;
    this.channel.broadcast({ v: 1, type: "stop", reason: detail });
    this.#signalGroup("SIGTERM");
    this.#escalateLater(graceS);
  }

  /**
   * The Python stacks of the job's main processes (those that said hello, else the one started) in
   * the stacks folder, while they are alive: where a job that makes no step is stuck.
   */
  async dumpStacks(): Promise<StackDump[]> {
    const dir = this.#options.stacksDir;
    if (dir === undefined || this.#stoppedBy !== null) return [];
    const known = this.#steppers.known;
    return dumpStacks(known.length > 0 ? known : [{ pid: this.pid, rank: null }], dir);
  }

  /** Asks the job's SDK clients to end at the next step boundary (the job exits on its own). */
  requestStop(reason: string): number {
    return this.channel.broadcast({ v: 1, type: "stop", reason });
  }

  /** Asks the SDK to lower memory use (split the micro-batch); returns how many processes were asked. */
  requestShrink(reason: string): number {
    return this.channel.broadcast({ v: 1, type: "shrink", reason });
  }

  /** Marks that NVML saw the GPU lost during the run. */
  markGpuLost(): void {
    this.#gpuLost = true;
  }

  #onMessage(message: ChannelMessage): void {
    this.#steppers.message(message, Date.now() / 1000);
    if (message.type === "step") {
      this.#channelSteps++;
      this.#steps++;
    } else if (message.type === "event" && message.kind === "oom_fatal") {
      this.#sdkOomFatal = true;
    } else if (message.type === "event" && typeof message.kind === "string" && ATTACH_COUNTS.has(message.kind)) {
      this.#attachCounts = true;
    }
    this.#options.onMessage?.(message);
  }

  #pipe(sources: Source[], options: JobOptions): void {
    this.#streamsEnded = pipeOutput(sources, {
      onChunk: options.onChunk,
      onSegment: (stream, text) => this.#progressSegment(text, stream),
      onLine: (stream, line) => this.#line(stream, line, options),
    });
  }

  #line(stream: 1 | 2, line: string, options: JobOptions): void {
    this.#tail.push(line);
    if (this.#tail.length > TAIL_LINES) this.#tail.shift();
    const oom = oomInLine(line);
    if (oom !== null) this.#oomLine = { kind: oom, line };
    options.onOutput?.(stream, line);
  }

  /**
   * The last resort: steps measured from the job's progress lines while no step comes over the
   * channel and the attach does not count the job's steps. Once a process of the job built a torch
   * model or an optimizer (the attach counts its steps), a bar the job prints before its first step (data preparation,
   * compilation, a tokenizer) is no training step, and the training bar counts what the attach counts.
   */
  #progressSegment(text: string, stream: 1 | 2): void {
    if (this.#channelSteps > 0 || this.#attachCounts || text.length > 4096) return;
    const rate = parseProgressLine(text, this.#pattern);
    if (rate === null) return;
    const steps = this.#progress.push(rate, Date.now() / 1000, stream);
    if (steps.length === 0) return;
    const counted = this.#progress.total - steps.filter((s) => s.steps > 0).length;
    steps.forEach((step, i) => {
      this.#steps++;
      const warmup = counted + i < (this.#options.warmupSteps ?? 0);
      const message: ChannelMessage = { v: 1, type: "step", pid: this.pid, ...step, warmup, micro_batch: null, accumulation: null, loss: null, mem: null };
      this.#steppers.message(message, Date.now() / 1000);
      this.#options.onMessage?.(message);
    });
    const budget = this.#options.stepBudget;
    if (budget != null && this.#progress.total >= budget) {
      this.stop("budget", `step budget of ${budget} steps reached (counted from the job's progress lines: ${Math.round(this.#progress.total)} steps)`, 3);
    }
  }

  /** With two or more ranks, `rankHangAfterS` (default `hungAfterS`); else `hungAfterS`. */
  #hangLimit(): number | null {
    const { hungAfterS = null, rankHangAfterS = null } = this.#options;
    return this.#steppers.ranks >= 2 ? (rankHangAfterS ?? hungAfterS) : hungAfterS;
  }

  #watchForHang(): void {
    const shortest = Math.min(...[this.#options.hungAfterS, this.#options.rankHangAfterS].filter((v): v is number => v != null));
    this.#hungTimer = setInterval(
      () => {
        const limit = this.#hangLimit();
        if (limit === null || this.#stoppedBy !== null || this.#stalled) return;
        const stall = this.#steppers.stalled(Date.now() / 1000, limit);
        if (stall !== null) void this.#onStall(stall, limit);
      },
      Math.min(1000, Math.max(100, (shortest * 1000) / 4)),
    );
    this.#hungTimer.unref();
  }

  /**
   * Every stepping process went quiet: a hang (with ranks, a collective that one rank never joined).
   * The stacks of every rank first, while they are alive (NCCL's watchdog would end them with no
   * trace), then SIGTERM to the ranks themselves so that the launcher sees its workers fail and
   * reports it; SIGKILL to them after the grace period (a rank blocked in a collective runs no
   * Python signal handler), the whole group after twice that.
   */
  async #onStall(stall: NonNullable<ReturnType<Steppers["stalled"]>>, limit: number): Promise<void> {
    this.#stalled = true;
    const detail = describeStall(stall, limit);
    const dir = this.#options.stacksDir;
    const dumps = dir !== undefined && this.#stoppedBy === null ? await dumpStacks(stall.steppers, dir) : [];
    if (this.#stoppedBy !== null) return;
    const ranks = stall.steppers.filter((s) => s.rank !== null).length;
    const dumped = dumps.filter((d) => d.file !== null);
    const where = dumped.map((d) => `${d.rank !== null ? `rank ${d.rank}` : `pid ${d.pid}`}: ${d.top ?? "?"}`).join("; ");
    this.#options.onMessage?.({
      v: 1,
      type: "event",
      t: Date.now() / 1000,
      pid: this.pid,
      kind: ranks >= 2 ? "ranks_stalled" : "job_stalled",
      step: Math.max(...stall.steppers.map((s) => s.steps)),
      message: `${detail}${dumped.length > 0 ? `; stacks of ${dumped.length} process${dumped.length === 1 ? "" : "es"} in ${dir} (${where})` : ""}`,
      details: {
        quiet_s: stall.quietS,
        limit_s: limit,
        ranks: stall.steppers.map((s) => ({
          pid: s.pid,
          rank: s.rank,
          local_rank: s.localRank,
          steps: s.steps,
          stack_file: dumps.find((d) => d.pid === s.pid)?.file ?? null,
          top_frame: dumps.find((d) => d.pid === s.pid)?.top ?? null,
        })),
      },
    });
    if (ranks < 2) {
      this.stop("hung", detail);
      return;
    }
    this.#stoppedBy = "hung";
    this.#stopDetail = detail;
    const pids = stall.steppers.map((s) => s.pid);
    const send = (signal: NodeJS.Signals): void => {
      for (const pid of pids) {
        try {
          process.kill(pid, signal);
        } catch {
          // already gone
        }
      }
    };
    send("SIGTERM");
    const graceS = this.#options.killGraceS ?? 10;
    setTimeout(() => send("SIGKILL"), graceS * 1000).unref();
    this.#escalateLater(graceS * 2);
  }

  #escalateLater(graceS: number = this.#options.killGraceS ?? 10): void {
    if (this.#killTimer) return;
    this.#killTimer = setTimeout(() => this.#signalGroup("SIGKILL"), graceS * 1000);
    this.#killTimer.unref();
  }

  #signalGroup(signal: NodeJS.Signals): boolean {
    return signalGroup(this.pid, signal, () => this.#child.kill(signal));
  }
}
