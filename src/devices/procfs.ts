/**
 * Processes, memory and CPU from procfs: pure parsers of the files' text, and {@link ProcFs},
 * a small reader with a configurable root (default /proc) that tests can point elsewhere.
 *
 * @example
 * ```ts
 * const proc = new ProcFs();
 * const tree = createTreeReader(proc);
 * tree.read(process.pid); // { pids: [...], rssBytes: ..., cpuPercent: null, ... }
 * ```
 * @module
 */
import { closeSync, openSync, readFileSync, readSync, readdirSync } from "node:fs";
import { join } from "node:path";

/**
 * The fields of /proc/<pid>/stat brim uses. Times are in clock ticks, RSS in pages.
 *
 * @example
 * ```ts
 * const s: ProcStat = { pid: 42, comm: "python", state: "S", ppid: 1, utimeTicks: 10, stimeTicks: 2, startTicks: 9000, rssPages: 5000 };
 * ```
 */
export interface ProcStat {
  pid: number;
  comm: string;
  state: string;
  ppid: number;
  utimeTicks: number;
  stimeTicks: number;
  startTicks: number;
  rssPages: number;
}

/**
 * Parses /proc/<pid>/stat. The command name sits in parentheses and may itself hold spaces and
 * parentheses, so the fields are counted from the last ")".
 *
 * @example
 * ```ts
 * parseProcStat("42 (py thon) S 1 42 42 0 -1 4194560 1 0 0 0 10 2 0 0 20 0 1 0 9000 1000000 5000 ...")?.ppid; // 1
 * ```
 */
export function parseProcStat(text: string): ProcStat | null {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 0 || close < open) return null;
  const pid = Number(text.slice(0, open).trim());
  const fields = text
    .slice(close + 2)
    .trim()
    .split(" ");
  // fields[0] is stat's field 3 (state), so field n is fields[n - 3].
  const field = (n: number): number => Number(fields[n - 3]);
  const stat: ProcStat = {
    pid,
    comm: text.slice(open + 1, close),
    state: fields[0] ?? "?",
    ppid: field(4),
    utimeTicks: field(14),
    stimeTicks: field(15),
    startTicks: field(22),
    rssPages: field(24),
  };
  return Number.isInteger(pid) && Number.isFinite(stat.ppid) && Number.isFinite(stat.utimeTicks) && Number.isFinite(stat.rssPages) ? stat : null;
}

/**
 * System memory from /proc/meminfo, in bytes. MemAvailable (kernel 3.14+) is what new work can
 * take without swapping; on older kernels it is estimated as MemFree + Buffers + Cached.
 *
 * @example
 * ```ts
 * parseMemInfo("MemTotal: 16384 kB\nMemAvailable: 8192 kB\n"); // { memTotalBytes: 16777216, memAvailableBytes: 8388608 }
 * ```
 */
export function parseMemInfo(text: string): { memTotalBytes: number; memAvailableBytes: number } | null {
  const kib = new Map<string, number>();
  for (const line of text.split("\n")) {
    const match = /^(\w+):\s+(\d+)(?:\s+kB)?/.exec(line);
    if (match?.[1] !== undefined && match[2] !== undefined) kib.set(match[1], Number(match[2]));
  }
  const total = kib.get("MemTotal");
  if (total === undefined) return null;
  const available = kib.get("MemAvailable") ?? (kib.get("MemFree") ?? 0) + (kib.get("Buffers") ?? 0) + (kib.get("Cached") ?? 0);
  return { memTotalBytes: total * 1024, memAvailableBytes: available * 1024 };
}

/**
 * All CPUs' time in clock ticks from the first line of /proc/stat: busy and total (idle and
 * iowait count as not busy; guest time is already inside user time).
 *
 * @example
 * ```ts
 * parseCpuTimes("cpu  100 0 50 800 50 0 0 0 0 0\n"); // { busyTicks: 150, totalTicks: 1000 }
 * ```
 */
export function parseCpuTimes(text: string): { busyTicks: number; totalTicks: number } | null {
  const line = text.split("\n", 1)[0] ?? "";
  if (!line.startsWith("cpu ")) return null;
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = line.slice(4).trim().split(/\s+/).map(Number);
  const total = user + nice + system + idle + iowait + irq + softirq + steal;
  return Number.isFinite(total) ? { busyTicks: total - idle - iowait, totalTicks: total } : null;
}

/**
 * The `NSpid:` line of /proc/<pid>/status: the pid in each PID namespace the process belongs to,
 * from the namespace of this procfs inwards. [] when the kernel has no such line (before 4.1).
 *
 * @example
 * ```ts
 * parseNsPids("Name:\tpython\nNSpid:\t81234\t17\n"); // [81234, 17]
 * ```
 */
export function parseNsPids(text: string): number[] {
  const match = /^NSpid:\s*([\d\s]+)$/m.exec(text);
  return match?.[1] === undefined ? [] : match[1].trim().split(/\s+/).map(Number);
}

/**
 * The page size and clock-tick rate from /proc/self/auxv (AT_PAGESZ 6, AT_CLKTCK 17), read as
 * 64-bit little-endian pairs; null for what is not there.
 *
 * @example
 * ```ts
 * parseAuxv(readFileSync("/proc/self/auxv")); // { pageSize: 4096, clockTicks: 100 }
 * ```
 */
export function parseAuxv(bytes: Uint8Array): { pageSize: number | null; clockTicks: number | null } {
  const data = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pageSize: number | null = null;
  let clockTicks: number | null = null;
  for (let at = 0; at + 16 <= bytes.byteLength; at += 16) {
    const type = data.getBigUint64(at, true);
    const value = Number(data.getBigUint64(at + 8, true));
    if (type === 0n) break;
    if (type === 6n) pageSize = value;
    if (type === 17n) clockTicks = value;
  }
  return { pageSize, clockTicks };
}

/**
 * The proportional set size from /proc/<pid>/smaps_rollup, in bytes: each resident page divided by
 * the number of processes that map it, so pages a forked loader worker shares with its parent count
 * once over the tree (the resident set counts them in each process). null without a `Pss:` line.
 *
 * @example
 * ```ts
 * parseSmapsRollupPss("Rss:  1692 kB\nPss:   205 kB\n"); // 209920
 * ```
 */
export function parseSmapsRollupPss(text: string): number | null {
  const match = /^Pss:\s+(\d+)\s+kB/m.exec(text);
  return match?.[1] === undefined ? null : Number(match[1]) * 1024;
}

/**
 * The root and all its descendants, root first then breadth-first; [] when the root is not among
 * `processes`.
 *
 * @example
 * ```ts
 * descendantPids([{ pid: 1, ppid: 0 }, { pid: 5, ppid: 1 }, { pid: 9, ppid: 5 }], 5); // [5, 9]
 * ```
 */
export function descendantPids(processes: Iterable<{ pid: number; ppid: number }>, rootPid: number): number[] {
  const children = new Map<number, number[]>();
  let rootSeen = false;
  for (const p of processes) {
    if (p.pid === rootPid) rootSeen = true;
    const siblings = children.get(p.ppid);
    if (siblings === undefined) children.set(p.ppid, [p.pid]);
    else siblings.push(p.pid);
  }
  if (!rootSeen) return [];
  const tree = [rootPid];
  for (let i = 0; i < tree.length; i++) {
    for (const child of children.get(tree[i] as number) ?? []) if (child !== rootPid && !tree.includes(child)) tree.push(child);
  }
  return tree;
}

/**
 * CPU use of a set of processes between two snapshots, in % of one core. A process absent from
 * the earlier snapshot started in between, so all its time counts; one that exited drops out.
 * Keys should tell reused pids apart (pid and start time).
 *
 * @example
 * ```ts
 * treeCpuPercent(new Map([["5:100", 10]]), new Map([["5:100", 60]]), 0.5, 100); // 100
 * ```
 */
export function treeCpuPercent(before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>, seconds: number, clockTicks: number): number | null {
  if (!(seconds > 0)) return null;
  let ticks = 0;
  for (const [key, now] of after) ticks += Math.max(0, now - (before.get(key) ?? 0));
  return (100 * ticks) / clockTicks / seconds;
}

/**
 * Reads procfs under `root` (default /proc). Page size and clock ticks come from the running
 * process's auxv; 4096 and 100 when it cannot be read.
 *
 * @example
 * ```ts
 * const proc = new ProcFs("/proc");
 * proc.stat(process.pid)?.rssPages;
 * ```
 */
export class ProcFs {
  readonly root: string;
  readonly pageSize: number;
  readonly clockTicks: number;

  constructor(root = "/proc") {
    this.root = root;
    let aux: { pageSize: number | null; clockTicks: number | null } = { pageSize: null, clockTicks: null };
    try {
      aux = parseAuxv(readFileSync(join(root, "self", "auxv")));
    } catch {
      // Defaults below.
    }
    this.pageSize = aux.pageSize ?? 4096;
    this.clockTicks = aux.clockTicks ?? 100;
  }

  #buffer = Buffer.alloc(16 * 1024);

  // open/read/close into one reused buffer: about three times cheaper than readFileSync on procfs.
  #read(...path: string[]): string | null {
    let fd: number;
    try {
      fd = openSync(join(this.root, ...path), "r");
    } catch {
      return null;
    }
    try {
      let length = 0;
      for (;;) {
        if (length === this.#buffer.length) {
          const larger = Buffer.alloc(this.#buffer.length * 2);
          this.#buffer.copy(larger);
          this.#buffer = larger;
        }
        const n = readSync(fd, this.#buffer, length, this.#buffer.length - length, null);
        if (n === 0) break;
        length += n;
      }
      return this.#buffer.toString("latin1", 0, length);
    } catch {
      return null;
    } finally {
      closeSync(fd);
    }
  }

  /** Every pid with a directory under the root. */
  pids(): number[] {
    try {
      return readdirSync(this.root)
        .filter((name) => /^\d+$/.test(name))
        .map(Number);
    } catch {
      return [];
    }
  }

  /** /proc/<pid>/stat parsed; null when the process is gone. */
  stat(pid: number): ProcStat | null {
    const text = this.#read(String(pid), "stat");
    return text === null ? null : parseProcStat(text);
  }

  /** /proc/<pid>/smaps_rollup's PSS in bytes (kernel 4.14+); null when gone or not readable. */
  pssBytes(pid: number): number | null {
    const text = this.#read(String(pid), "smaps_rollup");
    return text === null ? null : parseSmapsRollupPss(text);
  }

  /** /proc/<pid>/status NSpid; null when the process is gone. */
  nsPids(pid: number): number[] | null {
    const text = this.#read(String(pid), "status");
    return text === null ? null : parseNsPids(text);
  }

  memInfo(): { memTotalBytes: number; memAvailableBytes: number } | null {
    const text = this.#read("meminfo");
    return text === null ? null : parseMemInfo(text);
  }

  cpuTimes(): { busyTicks: number; totalTicks: number } | null {
    const text = this.#read("stat");
    return text === null ? null : parseCpuTimes(text);
  }
}

/**
 * A process tree at one moment, as procfs shows it.
 *
 * @example
 * ```ts
 * const t: ProcTree = { rootPid: 5, pids: [5, 9], rssBytes: 1 << 30, pssBytes: 1 << 29, cpuPercent: 95 };
 * ```
 */
export interface ProcTree {
  rootPid: number;
  pids: number[];
  rssBytes: number;
  /**
   * Σ PSS over the tree, each member's measured at most every 2 s and moved with its RSS in between
   * (a member not yet measured counts its RSS); null where smaps_rollup cannot be read (RSS counts then).
   */
  pssBytes: number | null;
  cpuPercent: number | null;
}

/**
 * Reads a process tree again and again, keeping what it needs to turn CPU time into CPU use and
 * to follow the tree's PSS cheaply (see {@link ProcTree.pssBytes}).
 * A process's parent does not change while both live, so only new pids and the tree's own
 * processes are read on each call; every pid is read again every `rescanMs` (default 5 s), which
 * also catches a pid that was freed and reused between two calls.
 *
 * @example
 * ```ts
 * const trees = createTreeReader(new ProcFs());
 * trees.read(pid); // cpuPercent null
 * trees.read(pid); // cpuPercent since the previous read
 * ```
 */
export function createTreeReader(
  proc: ProcFs,
  nowMs: () => number = Date.now,
  rescanMs = 5000,
  pssRefreshMs = 2000,
): { read(rootPid: number, extraRoots?: readonly number[]): ProcTree & { visiblePids: ReadonlySet<number> } } {
  let previous: { rootPid: number; atMs: number; ticks: Map<string, number> } | null = null;
  const pssOf = new Map<number, { pss: number; rssPages: number; startTicks: number; atMs: number }>();
  let pssUnreadable = false;
  const parents = new Map<number, number>();
  let scannedAtMs = -Infinity;
  return {
    read(rootPid: number, extraRoots: readonly number[] = []) {
      const atMs = nowMs();
      const visible = new Set(proc.pids());
      for (const pid of parents.keys()) if (!visible.has(pid)) parents.delete(pid);
      const rescan = atMs - scannedAtMs >= rescanMs;
      if (rescan) scannedAtMs = atMs;
      const fresh = new Map<number, ProcStat>();
      const readStat = (pid: number): ProcStat | null => {
        const stat = proc.stat(pid);
        if (stat === null) parents.delete(pid);
        else {
          parents.set(pid, stat.ppid);
          fresh.set(pid, stat);
        }
        return stat;
      };
      for (const pid of visible) if (rescan || !parents.has(pid)) readStat(pid);
      const asList = (): { pid: number; ppid: number }[] => [...parents].map(([pid, ppid]) => ({ pid, ppid }));
      // Members are read afresh (times, RSS, and a parent that may have changed); then the tree is taken again.
      // Extra roots: the job's processes that left its tree (see src/guard/escapes.ts), each with its own descendants.
      const members = (): number[] => [...new Set([rootPid, ...extraRoots].flatMap((root) => descendantPids(asList(), root)))];
      for (const pid of members()) if (!fresh.has(pid)) readStat(pid);
      const stats = members()
        .map((pid) => fresh.get(pid))
        .filter((stat) => stat !== undefined);
      const ticks = new Map<string, number>();
      let rssPages = 0;
      let pssBytes: number | null = 0;
      // smaps_rollup walks the page tables (about 14 ms for a PyTorch process on this VM): at most
      // one is read per call, each pid's at most every pssRefreshMs, and in between its PSS moves
      // with its RSS (new pages are private); a pid not yet measured counts its RSS.
      const due = stats
        .filter((stat) => {
          const known = pssOf.get(stat.pid);
          return known === undefined || known.startTicks !== stat.startTicks || atMs - known.atMs >= pssRefreshMs;
        })
        .sort((a, b) => (pssOf.get(a.pid)?.atMs ?? -Infinity) - (pssOf.get(b.pid)?.atMs ?? -Infinity))[0];
      if (due !== undefined) {
        const measured = proc.pssBytes(due.pid);
        if (measured === null) pssOf.delete(due.pid);
        else pssOf.set(due.pid, { pss: measured, rssPages: due.rssPages, startTicks: due.startTicks, atMs });
        if (measured === null && pssOf.size === 0 && proc.stat(due.pid) !== null) pssUnreadable = true;
      }
      for (const pid of pssOf.keys()) if (!stats.some((stat) => stat.pid === pid)) pssOf.delete(pid);
      for (const stat of stats) {
        rssPages += stat.rssPages;
        const known = pssOf.get(stat.pid);
        const pss =
          known !== undefined && known.startTicks === stat.startTicks
            ? Math.max(0, known.pss + (stat.rssPages - known.rssPages) * proc.pageSize)
            : stat.rssPages * proc.pageSize;
        pssBytes = pssUnreadable || pssBytes === null ? null : pssBytes + pss;
        ticks.set(`${stat.pid}:${stat.startTicks}`, stat.utimeTicks + stat.stimeTicks);
      }
      const cpuPercent =
        previous !== null && previous.rootPid === rootPid ? treeCpuPercent(previous.ticks, ticks, (atMs - previous.atMs) / 1000, proc.clockTicks) : null;
      previous = { rootPid, atMs, ticks };
      return {
        rootPid,
        pids: stats.map((stat) => stat.pid),
        rssBytes: rssPages * proc.pageSize,
        pssBytes: stats.length === 0 ? null : pssBytes,
        cpuPercent,
        visiblePids: visible,
      };
    },
  };
}

/**
 * Reads the host's available memory and CPU use (all CPUs together, 0–100) since the previous read.
 *
 * @example
 * ```ts
 * const host = createHostReader(new ProcFs());
 * host.read(); // { memAvailableBytes: …, cpuPercent: null } the first time
 * ```
 */
export function createHostReader(proc: ProcFs, fallbackMemAvailable: () => number): { read(): { memAvailableBytes: number; cpuPercent: number | null } } {
  let previous: { busyTicks: number; totalTicks: number } | null = null;
  return {
    read() {
      const times = proc.cpuTimes();
      let cpuPercent: number | null = null;
      if (times !== null && previous !== null && times.totalTicks > previous.totalTicks) {
        cpuPercent = (100 * (times.busyTicks - previous.busyTicks)) / (times.totalTicks - previous.totalTicks);
      }
      previous = times ?? previous;
      return { memAvailableBytes: proc.memInfo()?.memAvailableBytes ?? fallbackMemAvailable(), cpuPercent };
    },
  };
}
