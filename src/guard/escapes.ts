/**
 * Processes that left the job's process group but are still the job's: a daemon that double-forked
 * and called setsid(), a launcher that put a worker in a group of its own. Stopping the job's group
 * misses them, and following the job's pid down the parent links misses them once their parent
 * exits (they are re-parented to init). What they keep is the environment brim gave the job: every
 * process the job starts inherits `BRIM_RUN_ID=<this run's id>`. Found that way (same user, started
 * after the job, the marker in /proc/<pid>/environ), they are counted in the tree and the cap, named
 * in the record, and stopped when the run ends.
 *
 * A process that cleared its environment before exec is not found; see docs/reliability.md.
 *
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import type { RunEnd, TimelineEntry } from "../record/types.ts";

/**
 * One process found outside the job's group.
 *
 * @example
 * ```ts
 * const p: EscapedProcess = { pid: 4242, startTicks: 123456, command: "python -m server --daemon" };
 * ```
 */
export interface EscapedProcess {
  pid: number;
  startTicks: number;
  command: string;
}

interface StatFields {
  state: string;
  pgrp: number;
  startTicks: number;
}

function readStat(root: string, pid: number): StatFields | null {
  let text: string;
  try {
    text = readFileSync(`${root}/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const startTicks = Number(f[19]);
  const pgrp = Number(f[2]);
  if (f[0] === undefined || !Number.isFinite(startTicks) || !Number.isFinite(pgrp)) return null;
  return { state: f[0], pgrp, startTicks };
}

function commandOf(root: string, pid: number): string {
  try {
    const text = readFileSync(`${root}/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
    return text.length > 200 ? `${text.slice(0, 199)}…` : text;
  } catch {
    return "?";
  }
}

/**
 * Finds, again and again, the processes carrying a run's marker outside the job's process group.
 * Each process's environment is read once (a verdict is kept per pid and start time).
 *
 * @example
 * ```ts
 * const escapes = new EscapeWatch(runId, job.pid);
 * const outside = escapes.scan(); // [] while the job keeps to its group
 * ```
 */
export class EscapeWatch {
  readonly #marker: Buffer;
  readonly #pgid: number;
  readonly #root: string;
  readonly #sinceTicks: number;
  /** pid → [start ticks, carries the marker] */
  readonly #verdicts = new Map<number, [number, boolean]>();
  /** pid → the scan that found it not the job's */
  readonly #notOurs = new Map<number, number>();
  #scans = 0;
  /** every process ever found outside the group, by pid */
  readonly seen = new Map<number, EscapedProcess>();

  /** `pgid`: the job's process group (its leader's pid); `procRoot` for tests. */
  constructor(runId: string, pgid: number, procRoot = "/proc") {
    this.#marker = Buffer.from(`BRIM_RUN_ID=${runId}\0`);
    this.#pgid = pgid;
    this.#root = procRoot;
    this.#sinceTicks = readStat(procRoot, pgid)?.startTicks ?? 0;
  }

  /**
   * The processes running now that carry the marker and are not in the job's group. Processes found
   * not to be the job's (older than the job, or without the marker) are looked at again only every
   * tenth scan (a pid reused meanwhile is found then), unless `full`.
   */
  scan(full = false): EscapedProcess[] {
    this.#scans++;
    let names: string[];
    try {
      names = readdirSync(this.#root);
    } catch {
      return [];
    }
    const alive = new Set<number>();
    const found: EscapedProcess[] = [];
    for (const name of names) {
      if (!/^\d+$/.test(name)) continue;
      const pid = Number(name);
      alive.add(pid);
      if (pid === process.pid) continue;
      const judged = this.#notOurs.get(pid);
      if (!full && judged !== undefined && this.#scans - judged < 10) continue;
      const stat = readStat(this.#root, pid);
      if (stat === null || stat.pgrp === this.#pgid || stat.state === "Z" || stat.state === "X") continue;
      if (stat.startTicks < this.#sinceTicks) {
        this.#notOurs.set(pid, this.#scans);
        continue;
      }
      let verdict = this.#verdicts.get(pid);
      if (verdict === undefined || verdict[0] !== stat.startTicks) {
        verdict = [stat.startTicks, this.#carriesMarker(pid)];
        this.#verdicts.set(pid, verdict);
      }
      if (!verdict[1]) {
        this.#notOurs.set(pid, this.#scans);
        continue;
      }
      this.#notOurs.delete(pid);
      const known = this.seen.get(pid);
      const p = known !== undefined && known.startTicks === stat.startTicks ? known : { pid, startTicks: stat.startTicks, command: commandOf(this.#root, pid) };
      this.seen.set(pid, p);
      found.push(p);
    }
    for (const pid of this.#verdicts.keys()) if (!alive.has(pid)) this.#verdicts.delete(pid);
    for (const pid of this.#notOurs.keys()) if (!alive.has(pid)) this.#notOurs.delete(pid);
    return found;
  }

  #carriesMarker(pid: number): boolean {
    try {
      // Processes of other users are unreadable here (EACCES): not the job's.
      const environ = readFileSync(`${this.#root}/${pid}/environ`);
      return environ.indexOf(this.#marker) === 0 || environ.indexOf(Buffer.concat([Buffer.from([0]), this.#marker])) >= 0;
    } catch {
      return false;
    }
  }

  /** True while `p` (the same process, not a reused pid) runs. */
  alive(p: EscapedProcess): boolean {
    const stat = readStat(this.#root, p.pid);
    return stat !== null && stat.startTicks === p.startTicks && stat.state !== "Z" && stat.state !== "X";
  }

  /**
   * Stops every marked process outside the group: SIGTERM, SIGKILL after `graceS`, again for what
   * they started meanwhile. Resolves with those that were running (each once).
   */
  async stopAll(graceS: number): Promise<EscapedProcess[]> {
    const stopped = new Map<number, EscapedProcess>();
    for (let round = 0; round < 4; round++) {
      const now = this.scan(true);
      if (now.length === 0) break;
      for (const p of now) {
        stopped.set(p.pid, p);
        signal(p.pid, "SIGTERM");
      }
      const deadline = Date.now() + graceS * 1000;
      while (now.some((p) => this.alive(p)) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      for (const p of now) if (this.alive(p)) signal(p.pid, "SIGKILL");
      const killed = Date.now() + 2000;
      while (now.some((p) => this.alive(p)) && Date.now() < killed) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return [...stopped.values()];
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // gone already, or not ours after all
  }
}

/**
 * The record's sentence for processes the job left behind.
 *
 * @example
 * ```ts
 * leftBehindMessage([{ pid: 7, startTicks: 1, command: "sleep 600" }], true); // "1 process left behind by the job was stopped (pid 7: sleep 600)"
 * ```
 */
export function leftBehindMessage(processes: readonly EscapedProcess[], stopped: boolean): string {
  const n = processes.length;
  const shown = processes
    .slice(0, 3)
    .map((p) => `pid ${p.pid}: ${p.command}`)
    .join("; ");
  const more = n > 3 ? `; and ${n - 3} more` : "";
  return `${n} process${n === 1 ? "" : "es"} left behind by the job ${stopped ? (n === 1 ? "was stopped" : "were stopped") : n === 1 ? "still runs" : "still run"} (${shown}${more})`;
}

/**
 * The guard's side: `look()` now and then (each newly found process gets an event in the timeline),
 * `roots()` for the sampler, `finish()` once the job's group is gone (stops what is left, or leaves
 * it, and says so in the run's end message).
 *
 * @example
 * ```ts
 * const escapes = followEscapes(writer.id, job.pid, (e) => writer.append(e));
 * setInterval(escapes.look, 1000);
 * result = await escapes.finish(result, { stop: true, graceS: 5 });
 * ```
 */
export function followEscapes(
  runId: string,
  pgid: number,
  append: (entry: TimelineEntry) => void,
  procRoot = "/proc",
): { look: () => void; roots: () => number[]; finish<T extends { end: RunEnd }>(result: T, options: { stop: boolean; graceS: number }): Promise<T> } {
  const watch = new EscapeWatch(runId, pgid, procRoot);
  let outside: number[] = [];
  return {
    look: (): void => {
      const found = watch.scan();
      for (const p of found) {
        if (outside.includes(p.pid)) continue;
        append({
          t: Date.now() / 1000,
          kind: "event",
          event: "process_left_group",
          pid: p.pid,
          step: null,
          message: `a process of the job left its process group (pid ${p.pid}: ${p.command}); brim counts it with the job`,
          details: { pid: p.pid, command: p.command },
        });
      }
      outside = found.map((p) => p.pid);
    },
    roots: () => outside,
    async finish(result, options) {
      const left = options.stop ? await watch.stopAll(options.graceS) : watch.scan(true);
      outside = [];
      if (left.length === 0) return result;
      const message = leftBehindMessage(left, options.stop);
      append({
        t: Date.now() / 1000,
        kind: "event",
        event: options.stop ? "left_behind_stopped" : "left_behind_running",
        pid: null,
        step: null,
        message,
        details: { processes: left.map((p) => ({ pid: p.pid, command: p.command })) },
      });
      const end = result.end;
      return { ...result, end: { ...end, message: end.message === "" ? message : `${end.message}; ${message}` } };
    },
  };
}
