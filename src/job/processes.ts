/**
 * The job's processes as Linux shows them: its process group, a process's ancestry, whether a
 * process catches a signal (/proc).
 *
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import { constants as osConstants } from "node:os";

function statFields(pid: number): string[] | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/**
 * True when `pid` is `rootPid` or descends from it (parents read from /proc).
 *
 * @example
 * ```ts
 * inProcessTree(process.pid, process.pid); // true
 * ```
 */
export function inProcessTree(pid: number, rootPid: number): boolean {
  let at = pid;
  for (let hops = 0; hops < 256 && Number.isSafeInteger(at) && at > 1; hops++) {
    if (at === rootPid) return true;
    const fields = statFields(at);
    if (fields === null) return false;
    at = Number(fields[1]);
  }
  return false;
}

/**
 * True while a member of process group `pgid` still runs (zombies left unreaped do not count).
 *
 * @example
 * ```ts
 * groupAlive(job.pid);
 * ```
 */
export function groupAlive(pgid: number): boolean {
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
    const fields = statFields(Number(entry));
    if (fields !== null && Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X") return true;
  }
  return false;
}

/**
 * True when process `pid` runs and has a handler for `signal` (SigCgt in /proc/PID/status): only
 * then may brim send it a signal whose default action would end it.
 *
 * @example
 * ```ts
 * catchesSignal(rankPid, STACK_SIGNAL); // true once the boot sitecustomize registered its stack dump
 * ```
 */
export function catchesSignal(pid: number, signal: NodeJS.Signals | number): boolean {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    return false;
  }
  const mask = /^SigCgt:\s*([0-9a-f]+)$/im.exec(status)?.[1];
  const number = typeof signal === "number" ? signal : osConstants.signals[signal];
  if (mask === undefined || number === undefined) return false;
  return ((BigInt(`0x${mask}`) >> BigInt(number - 1)) & 1n) === 1n;
}

/**
 * Sends `signal` to process group `pgid`, or to `fallback` where the group cannot be signalled;
 * false when neither could be.
 *
 * @example
 * ```ts
 * signalGroup(job.pid, "SIGTERM", () => child.kill("SIGTERM"));
 * ```
 */
export function signalGroup(pgid: number, signal: NodeJS.Signals, fallback: () => void): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    try {
      fallback();
      return true;
    } catch {
      return false;
    }
  }
}

/**
 * Ends what is left of process group `pgid`: SIGTERM, up to 2 s, then SIGKILL and up to 2 s more.
 *
 * @example
 * ```ts
 * await reapGroup(job.pid, (signal) => signalGroup(job.pid, signal, () => {}));
 * ```
 */
export async function reapGroup(pgid: number, send: (signal: NodeJS.Signals) => void): Promise<void> {
  if (!groupAlive(pgid)) return;
  send("SIGTERM");
  const deadline = Date.now() + 2000;
  while (groupAlive(pgid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  if (groupAlive(pgid)) send("SIGKILL");
  const killDeadline = Date.now() + 2000;
  while (groupAlive(pgid) && Date.now() < killDeadline) await new Promise((resolve) => setTimeout(resolve, 20));
}
