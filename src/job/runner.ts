import { spawn, type ChildProcess } from "node:child_process";
import { StringDecoder } from "node:string_decoder";
import { randomBytes } from "node:crypto";
import { accessSync, constants as fsConstants, existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { constants as osConstants } from "node:os";
import { delimiter, dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { BrimError } from "../errors/index.ts";
import { parseProgressLine, progressPattern, ProgressSteps } from "../record/progress-lines.ts";
import type { RunEnd } from "../record/types.ts";
import { ChannelServer, type ChannelMessage, type ChannelStats } from "./channel.ts";
import { compactPartial, settleLine } from "./output-text.ts";
import { classifyEnd, oomInLine, type BrimStopReason, type OomKind } from "./classify.ts";

/** brim's own Python SDK folder, appended to PYTHONPATH so an example finds `brim` without installing it. */
export const BUNDLED_SDK_PATH = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "python");

/** The folder whose `sitecustomize` attaches brim to an unmodified Python job (docs/attach.md); first on PYTHONPATH. */
export const ATTACH_BOOT_PATH = join(BUNDLED_SDK_PATH, "_brim_boot");

const OFF = new Set(["0", "false", "no", "off"]);

/**
 * Whether brim attaches to the job: on unless `attach: false` (`--no-attach`) or `BRIM_ATTACH=0`.
 *
 * @example
 * ```ts
 * attachEnabled({ BRIM_ATTACH: "0" }); // false
 * ```
 */
export function attachEnabled(env: NodeJS.ProcessEnv, attach?: boolean): boolean {
  return attach !== false && !OFF.has((env.BRIM_ATTACH ?? "1").trim().toLowerCase());
}

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

const TAIL_LINES = 60;

/** The part of a started process the job needs: a pid, a way to signal it, and to let go of its output. */
interface Spawned {
  pid: number;
  kill(signal: NodeJS.Signals): void;
  release(): void;
}

/** An output source: chunks, then an end. */
interface Source {
  stream: 1 | 2;
  onData(listener: (chunk: string) => void): void;
  ended: Promise<void>;
}

interface PtyProcess {
  pid: number;
  kill(signal?: string): void;
  resize(columns: number, rows: number): void;
  onData(listener: (data: string) => void): void;
  onExit(listener: (e: { exitCode: number; signal?: number }) => void): void;
}
type PtySpawn = (file: string, args: string[], options: { name: string; cols: number; rows: number; cwd?: string; env: NodeJS.ProcessEnv }) => PtyProcess;

let ptySpawn: PtySpawn | null | undefined;
function loadPty(): PtySpawn | null {
  if (ptySpawn !== undefined) return ptySpawn;
  try {
    ptySpawn = (createRequire(import.meta.url)("@lydell/node-pty") as { spawn: PtySpawn }).spawn;
  } catch {
    ptySpawn = null;
  }
  return ptySpawn;
}

/** The executable `program` names, looked up on PATH like the shell does; null when there is none. */
function resolveProgram(program: string, env: NodeJS.ProcessEnv, cwd: string | undefined): string | null {
  const executable = (p: string): boolean => {
    try {
      accessSync(p, fsConstants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  if (program.includes("/")) {
    const p = isAbsolute(program) ? program : resolve(cwd ?? process.cwd(), program);
    return executable(p) ? p : null;
  }
  for (const dir of (env.PATH ?? "").split(delimiter)) if (dir !== "" && executable(join(dir, program))) return join(dir, program);
  return null;
}

const signalName = (n: number | undefined): string | null => (n ? (Object.entries(osConstants.signals).find(([, v]) => v === n)?.[0] ?? null) : null);

/**
 * The environment a job runs with: the SDK's variables (docs/sdk.md) on top of the base.
 *
 * @example
 * ```ts
 * jobEnvironment({ command: ["python", "train.py"], runId: "r1", knobs: { batch_size: 64 } }, "/tmp/brim.sock").BRIM_KNOBS;
 * // '{"batch_size":64}'
 * ```
 */
export function jobEnvironment(options: JobOptions, channelPath: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...(options.baseEnv ?? process.env) };
  env.BRIM_CHANNEL = channelPath;
  if (options.channelToken !== undefined) env.BRIM_CHANNEL_TOKEN = options.channelToken;
  env.BRIM_RUN_ID = options.runId;
  if (env.PYTHONUNBUFFERED === undefined) {
    // output as it comes; brim's sitecustomize then makes it line-buffered (whole lines per write)
    env.PYTHONUNBUFFERED = "1";
    env.BRIM_LINE_BUFFERED = "1";
  }
  if (options.knobs !== undefined && Object.keys(options.knobs).length > 0) env.BRIM_KNOBS = JSON.stringify(options.knobs);
  if (options.stepBudget != null) env.BRIM_STEP_BUDGET = String(options.stepBudget);
  if (options.warmupSteps != null) env.BRIM_WARMUP_STEPS = String(options.warmupSteps);
  if (options.gpuCapBytes != null) {
    env.BRIM_MEMORY_CAP_BYTES = String(Math.floor(options.gpuCapBytes));
    if (options.gpuTotalBytes != null && options.gpuTotalBytes > 0 && env.XLA_PYTHON_CLIENT_MEM_FRACTION === undefined) {
      env.XLA_PYTHON_CLIENT_PREALLOCATE = env.XLA_PYTHON_CLIENT_PREALLOCATE ?? "false";
      env.XLA_PYTHON_CLIENT_MEM_FRACTION = (Math.floor((options.gpuCapBytes / options.gpuTotalBytes) * 100) / 100).toFixed(2);
    }
  }
  const final: NodeJS.ProcessEnv = { ...env, ...options.env };
  const paths = final.PYTHONPATH === undefined || final.PYTHONPATH === "" ? [] : final.PYTHONPATH.split(delimiter);
  if (options.bundledSdk !== false) {
    if (attachEnabled(final, options.attach)) paths.unshift(ATTACH_BOOT_PATH);
    paths.push(BUNDLED_SDK_PATH);
  }
  if (!attachEnabled(final, options.attach)) final.BRIM_ATTACH = "0";
  if (paths.length > 0) final.PYTHONPATH = paths.join(delimiter);
  return final;
}

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
  #progress = new ProgressSteps();
  #pattern: RegExp | undefined;
  #lastStepAt: number | null = null;
  #killTimer: NodeJS.Timeout | null = null;
  #hungTimer: NodeJS.Timeout | null = null;
  #done: Promise<JobResult>;

  private constructor(
    child: Spawned,
    sources: Source[],
    channel: ChannelServer,
    options: JobOptions,
    exited: Promise<{ code: number | null; signal: string | null }>,
    pattern: RegExp | undefined,
  ) {
    this.#child = child;
    this.#pattern = pattern;
    this.pid = child.pid;
    this.startedAt = Date.now() / 1000;
    this.channel = channel;
    this.#options = options;
    this.#pipe(sources, options);
    if (options.hungAfterS != null) this.#watchForHang(options.hungAfterS);
    this.#done = exited.then(async ({ code, signal }) => {
      const endedAt = Date.now() / 1000;
      await this.#reapGroup();
      // 'exit' can come before the last output is read: the OOM traceback that decides the cause
      await Promise.race([Promise.all(this.#streamsEnded), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
      child.release();
      if (this.#killTimer) clearTimeout(this.#killTimer);
      if (this.#hungTimer) clearInterval(this.#hungTimer);
      await channel.close();
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
    const [program, ...args] = options.command;
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
    const ptyFile = options.pty != null ? resolveProgram(program, env, options.cwd) : null;
    const pty = ptyFile !== null ? loadPty() : null;
    if (options.pty != null && ptyFile !== null && pty !== null) {
      let proc: PtyProcess;
      try {
        proc = pty(ptyFile, args, { name: env.TERM ?? "xterm-256color", cols: options.pty.columns, rows: options.pty.rows, cwd: options.cwd, env });
      } catch (error) {
        await channel.close();
        throw new BrimError("E_JOB_START", `cannot start '${program}': ${(error as Error).message}`, { cause: error });
      }
      // node-pty makes the child a session (and process group) leader, as detached spawn does
      let markEnded: () => void = () => {};
      const source: Source = { stream: 1, onData: (listener) => proc.onData(listener), ended: new Promise<void>((r) => (markEnded = r)) };
      const current = options.pty.current;
      const onResize = (): void => {
        const size = current?.();
        if (size !== undefined && size.columns > 0 && size.rows > 0) proc.resize(size.columns, size.rows);
      };
      if (current !== undefined) process.on("SIGWINCH", onResize);
      const exited = new Promise<{ code: number | null; signal: string | null }>((done) => {
        proc.onExit(({ exitCode, signal }) => {
          process.off("SIGWINCH", onResize);
          setImmediate(markEnded);
          const name = signalName(signal);
          done(name !== null ? { code: null, signal: name } : { code: exitCode, signal: null });
        });
      });
      // the pseudo-terminal closes when the job's session ends; nothing to let go of
      const job = new Job({ pid: proc.pid, kill: (signal) => proc.kill(signal), release: () => {} }, [source], channel, options, exited, pattern);
      box.job = job;
      for (const message of pending) job.#onMessage(message);
      return job;
    }
    let child: ChildProcess;
    try {
      child = spawn(program, args, {
        cwd: options.cwd,
        env,
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
      });
    } catch (error) {
      await channel.close();
      throw new BrimError("E_JOB_START", `cannot start '${program}': ${(error as Error).message}`, { cause: error });
    }
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
      child.once("exit", (code, signal) => resolve({ code, signal }));
    });
    try {
      await new Promise<void>((resolve, reject) => {
        child.once("spawn", () => resolve());
        child.once("error", reject);
      });
    } catch (error) {
      await channel.close();
      const code = (error as NodeJS.ErrnoException).code;
      const missingCwd = code === "ENOENT" && options.cwd !== undefined && !existsSync(options.cwd);
      const why = missingCwd
        ? `the working folder ${options.cwd} does not exist`
        : code === "ENOENT"
          ? "command not found"
          : code === "EACCES"
            ? "permission denied"
            : (error as Error).message;
      throw new BrimError("E_JOB_START", `cannot start '${program}': ${why}`, { cause: error });
    }
    const sources: Source[] = [];
    for (const [stream, readable] of [
      [1, child.stdout],
      [2, child.stderr],
    ] as const) {
      if (!readable) continue;
      // Bytes first (passed through as they are), then text: a character split across reads is kept whole.
      const decoder = new StringDecoder("utf8");
      let deliver: (chunk: string) => void = () => {};
      const ended = new Promise<void>((r) => {
        readable.on("end", () => {
          const rest = decoder.end();
          if (rest !== "") deliver(rest);
          r();
        });
        readable.on("error", () => r());
      });
      const onData = (listener: (chunk: string) => void): void => {
        deliver = listener;
        readable.on("data", (bytes: Buffer) => {
          options.onBytes?.(stream, bytes);
          const text = decoder.write(bytes);
          if (text !== "") listener(text);
        });
      };
      sources.push({ stream, onData, ended });
    }
    const spawned: Spawned = {
      pid: child.pid as number,
      kill: (signal) => void child.kill(signal),
      // a process that left the group still holding stdout must not keep brim alive after the run
      release: () => {
        child.stdout?.destroy();
        child.stderr?.destroy();
      },
    };
    const job = new Job(spawned, sources, channel, options, exited, pattern);
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
    if (message.type === "step") {
      this.#channelSteps++;
      this.#steps++;
      this.#lastStepAt = Date.now() / 1000;
    } else if (message.type === "event" && message.kind === "oom_fatal") {
      this.#sdkOomFatal = true;
    }
    this.#options.onMessage?.(message);
  }

  #pipe(sources: Source[], options: JobOptions): void {
    for (const source of sources) {
      const { stream, ended } = source;
      let partial = "";
      let segment = "";
      source.onData((chunk: string) => {
        options.onChunk?.(stream, chunk);
        // progress bars redraw with \r: each update is read as it comes, not when the line ends
        const segments = (segment + chunk).split(/[\r\n]/);
        segment = segments.pop() ?? "";
        for (const text of segments) this.#progressSegment(text, stream);
        const lines = (partial + chunk).split("\n");
        // a \r progress bar never ends its line: keep only what it shows now
        partial = compactPartial(lines.pop() ?? "");
        for (const line of lines) this.#line(stream, settleLine(line), options);
      });
      this.#streamsEnded.push(
        ended.then(() => {
          if (partial !== "") this.#line(stream, settleLine(partial), options);
          partial = "";
        }),
      );
    }
  }

  #line(stream: 1 | 2, line: string, options: JobOptions): void {
    this.#tail.push(line);
    if (this.#tail.length > TAIL_LINES) this.#tail.shift();
    const oom = oomInLine(line);
    if (oom !== null) this.#oomLine = { kind: oom, line };
    options.onOutput?.(stream, line);
  }

  /** The last resort: steps measured from the job's progress lines while no step comes over the channel. */
  #progressSegment(text: string, stream: 1 | 2): void {
    if (this.#channelSteps > 0 || text.length > 4096) return;
    const rate = parseProgressLine(text, this.#pattern);
    if (rate === null) return;
    const steps = this.#progress.push(rate, Date.now() / 1000, stream);
    if (steps.length === 0) return;
    const counted = this.#progress.total - steps.filter((s) => s.steps > 0).length;
    steps.forEach((step, i) => {
      this.#steps++;
      const warmup = counted + i < (this.#options.warmupSteps ?? 0);
      this.#options.onMessage?.({ v: 1, type: "step", pid: this.pid, ...step, warmup, micro_batch: null, accumulation: null, loss: null, mem: null });
    });
    this.#lastStepAt = Date.now() / 1000;
    const budget = this.#options.stepBudget;
    if (budget != null && this.#progress.total >= budget) {
      this.stop("budget", `step budget of ${budget} steps reached (counted from the job's progress lines: ${Math.round(this.#progress.total)} steps)`, 3);
    }
  }

  #watchForHang(seconds: number): void {
    this.#hungTimer = setInterval(
      () => {
        if (this.#lastStepAt === null || this.#stoppedBy !== null) return;
        const quiet = Date.now() / 1000 - this.#lastStepAt;
        if (quiet >= seconds) this.stop("hung", `no training step for ${quiet.toFixed(0)} s (limit ${seconds} s) after step ${this.#steps}`);
      },
      Math.min(1000, Math.max(100, (seconds * 1000) / 4)),
    );
    this.#hungTimer.unref();
  }

  #escalateLater(graceS: number = this.#options.killGraceS ?? 10): void {
    if (this.#killTimer) return;
    this.#killTimer = setTimeout(() => this.#signalGroup("SIGKILL"), graceS * 1000);
    this.#killTimer.unref();
  }

  #signalGroup(signal: NodeJS.Signals): boolean {
    try {
      process.kill(-this.pid, signal);
      return true;
    } catch {
      try {
        this.#child.kill(signal);
        return true;
      } catch {
        return false;
      }
    }
  }

  async #reapGroup(): Promise<void> {
    if (!groupAlive(this.pid)) return;
    this.#signalGroup("SIGTERM");
    const deadline = Date.now() + 2000;
    while (groupAlive(this.pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    if (groupAlive(this.pid)) this.#signalGroup("SIGKILL");
    const killDeadline = Date.now() + 2000;
    while (groupAlive(this.pid) && Date.now() < killDeadline) await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** True when `pid` is `rootPid` or descends from it (parents read from /proc). */
function inProcessTree(pid: number, rootPid: number): boolean {
  let at = pid;
  for (let hops = 0; hops < 256 && Number.isSafeInteger(at) && at > 1; hops++) {
    if (at === rootPid) return true;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${at}/stat`, "utf8");
    } catch {
      return false;
    }
    at = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  }
  return false;
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  // A killed member stays in the group as a zombie until its new parent reaps it, which some
  // container init processes never do: only members that still run count.
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return true;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X") return true;
  }
  return false;
}
