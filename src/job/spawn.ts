/**
 * Starting the user's command: in a process group of its own on pipes, or on a pseudo-terminal
 * (node-pty) when brim itself runs on one; a one-line cause when it cannot start.
 *
 * @module
 */
import { spawn, type ChildProcess } from "node:child_process";
import { StringDecoder } from "node:string_decoder";
import { accessSync, constants as fsConstants, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { constants as osConstants } from "node:os";
import { delimiter, isAbsolute, join, resolve } from "node:path";
import { BrimError } from "../errors/index.ts";
import type { PtySize } from "./types.ts";

/** The part of a started process the job needs: a pid, a way to signal it, and to let go of its output. */
export interface Spawned {
  pid: number;
  kill(signal: NodeJS.Signals): void;
  release(): void;
}

/** An output source: chunks, then an end. */
export interface Source {
  stream: 1 | 2;
  onData(listener: (chunk: string) => void): void;
  ended: Promise<void>;
}

/** How a started command exited. */
export interface Exit {
  code: number | null;
  signal: string | null;
}

/** A started command: the process, its output sources, and its exit. */
export interface Started {
  spawned: Spawned;
  sources: Source[];
  exited: Promise<Exit>;
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

function startOnPty(pty: PtySpawn, file: string, program: string, args: string[], size: PtySize, env: NodeJS.ProcessEnv, cwd: string | undefined): Started {
  let proc: PtyProcess;
  try {
    proc = pty(file, args, { name: env.TERM ?? "xterm-256color", cols: size.columns, rows: size.rows, cwd, env });
  } catch (error) {
    throw new BrimError("E_JOB_START", `cannot start '${program}': ${(error as Error).message}`, { cause: error });
  }
  // node-pty makes the child a session (and process group) leader, as detached spawn does
  let markEnded: () => void = () => {};
  const source: Source = { stream: 1, onData: (listener) => proc.onData(listener), ended: new Promise<void>((r) => (markEnded = r)) };
  const current = size.current;
  const onResize = (): void => {
    const now = current?.();
    if (now !== undefined && now.columns > 0 && now.rows > 0) proc.resize(now.columns, now.rows);
  };
  if (current !== undefined) process.on("SIGWINCH", onResize);
  const exited = new Promise<Exit>((done) => {
    proc.onExit(({ exitCode, signal }) => {
      process.off("SIGWINCH", onResize);
      setImmediate(markEnded);
      const name = signalName(signal);
      done(name !== null ? { code: null, signal: name } : { code: exitCode, signal: null });
    });
  });
  // the pseudo-terminal closes when the job's session ends; nothing to let go of
  return { spawned: { pid: proc.pid, kill: (signal) => proc.kill(signal), release: () => {} }, sources: [source], exited };
}

function pipeSources(child: ChildProcess, onBytes: ((stream: 1 | 2, bytes: Buffer) => void) | undefined): Source[] {
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
        onBytes?.(stream, bytes);
        const text = decoder.write(bytes);
        if (text !== "") listener(text);
      });
    };
    sources.push({ stream, onData, ended });
  }
  return sources;
}

/**
 * Starts `command` with `env`: on a pseudo-terminal of `pty`'s size when one is asked for and
 * node-pty and the program are found, else detached (a process group of its own) on pipes.
 * Throws `E_JOB_START` with a one-line cause.
 *
 * @example
 * ```ts
 * const { spawned, sources, exited } = await startCommand(["python", "train.py"], { env: process.env });
 * ```
 */
export async function startCommand(
  command: readonly string[],
  options: { env: NodeJS.ProcessEnv; cwd?: string; pty?: PtySize | null; onBytes?: (stream: 1 | 2, bytes: Buffer) => void },
): Promise<Started> {
  const [program = "", ...args] = command;
  const { env, cwd } = options;
  const ptyFile = options.pty != null ? resolveProgram(program, env, cwd) : null;
  const pty = ptyFile !== null ? loadPty() : null;
  if (options.pty != null && ptyFile !== null && pty !== null) return startOnPty(pty, ptyFile, program, args, options.pty, env, cwd);
  let child: ChildProcess;
  try {
    child = spawn(program, args, { cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  } catch (error) {
    throw new BrimError("E_JOB_START", `cannot start '${program}': ${(error as Error).message}`, { cause: error });
  }
  const exited = new Promise<Exit>((done) => {
    child.once("exit", (code, signal) => done({ code, signal }));
  });
  try {
    await new Promise<void>((done, reject) => {
      child.once("spawn", () => done());
      child.once("error", reject);
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const missingCwd = code === "ENOENT" && cwd !== undefined && !existsSync(cwd);
    const why = missingCwd
      ? `the working folder ${cwd} does not exist`
      : code === "ENOENT"
        ? "command not found"
        : code === "EACCES"
          ? "permission denied"
          : (error as Error).message;
    const status = missingCwd ? "E_JOB_START" : code === "ENOENT" ? "E_JOB_NOT_FOUND" : code === "EACCES" ? "E_JOB_NOT_EXECUTABLE" : "E_JOB_START";
    throw new BrimError(status, `cannot start '${program}': ${why}`, { cause: error });
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
  return { spawned, sources: pipeSources(child, options.onBytes), exited };
}
