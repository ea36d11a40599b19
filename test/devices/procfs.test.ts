import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  ProcFs,
  createHostReader,
  createTreeReader,
  descendantPids,
  parseAuxv,
  parseCpuTimes,
  parseMemInfo,
  parseNsPids,
  parseProcStat,
  treeCpuPercent,
} from "../../src/devices/procfs.ts";

function statLine(pid: number, comm: string, ppid: number, utime: number, stime: number, start: number, rssPages: number): string {
  // Fields 3..24 of /proc/<pid>/stat; the rest of the line follows as the kernel writes it.
  const fields = ["S", ppid, pid, pid, 0, -1, 4194560, 100, 0, 0, 0, utime, stime, 0, 0, 20, 0, 1, 0, start, 10_000_000, rssPages];
  return `${pid} (${comm}) ${fields.join(" ")} 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n`;
}

describe("procfs parsers", () => {
  it("reads /proc/<pid>/stat, even with spaces and parentheses in the command name", () => {
    expect(parseProcStat(statLine(42, "py thon) (x", 7, 150, 30, 9000, 5000))).toEqual({
      pid: 42,
      comm: "py thon) (x",
      state: "S",
      ppid: 7,
      utimeTicks: 150,
      stimeTicks: 30,
      startTicks: 9000,
      rssPages: 5000,
    });
    expect(parseProcStat("garbage")).toBeNull();
  });

  it("reads /proc/meminfo, estimating MemAvailable on old kernels", () => {
    expect(parseMemInfo("MemTotal:       16384 kB\nMemFree:  1024 kB\nMemAvailable:    8192 kB\n")).toEqual({
      memTotalBytes: 16384 * 1024,
      memAvailableBytes: 8192 * 1024,
    });
    expect(parseMemInfo("MemTotal: 100 kB\nMemFree: 10 kB\nBuffers: 5 kB\nCached: 20 kB\n")).toEqual({ memTotalBytes: 102400, memAvailableBytes: 35 * 1024 });
    expect(parseMemInfo("nothing")).toBeNull();
  });

  it("reads host CPU ticks from /proc/stat", () => {
    expect(parseCpuTimes("cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 1 2 3 4\n")).toEqual({ busyTicks: 160, totalTicks: 1000 });
    expect(parseCpuTimes("intr 1 2 3")).toBeNull();
  });

  it("reads NSpid from /proc/<pid>/status", () => {
    expect(parseNsPids("Name:\tpython\nNSpid:\t81234\t17\nNSpgid:\t1\n")).toEqual([81234, 17]);
    expect(parseNsPids("Name:\tpython\nPid:\t5\n")).toEqual([]);
  });

  it("reads the page size and clock ticks from auxv", () => {
    const aux = Buffer.alloc(5 * 16);
    [
      [3n, 0x400040n],
      [6n, 16384n],
      [17n, 100n],
      [0n, 0n],
      [6n, 1n],
    ].forEach(([type, value], i) => {
      aux.writeBigUInt64LE(type ?? 0n, i * 16);
      aux.writeBigUInt64LE(value ?? 0n, i * 16 + 8);
    });
    expect(parseAuxv(aux)).toEqual({ pageSize: 16384, clockTicks: 100 });
    expect(parseAuxv(Buffer.alloc(0))).toEqual({ pageSize: null, clockTicks: null });
  });

  it("finds every descendant, root first", () => {
    const processes = [
      { pid: 1, ppid: 0 },
      { pid: 5, ppid: 1 },
      { pid: 9, ppid: 5 },
      { pid: 10, ppid: 9 },
      { pid: 11, ppid: 5 },
      { pid: 12, ppid: 1 },
    ];
    expect(descendantPids(processes, 5)).toEqual([5, 9, 11, 10]);
    expect(descendantPids(processes, 99)).toEqual([]);
  });

  it("turns CPU ticks into % of one core, counting processes that started in between", () => {
    const before = new Map([
      ["5:100", 10],
      ["6:100", 50],
    ]);
    const after = new Map([
      ["5:100", 60],
      ["7:300", 25],
    ]);
    expect(treeCpuPercent(before, after, 0.5, 100)).toBe(150);
    expect(treeCpuPercent(before, after, 0, 100)).toBeNull();
  });
});

describe("ProcFs on a made-up root", () => {
  it("reads the tree, its RSS and CPU use, and the host", () => {
    const root = mkdtempSync(join(tmpdir(), "brim-proc-"));
    const write = (path: string, text: string): void => {
      mkdirSync(join(root, path, ".."), { recursive: true });
      writeFileSync(join(root, path), text);
    };
    const processes = (tick: number): void => {
      write("1/stat", statLine(1, "init", 0, 5, 5, 1, 100));
      write("100/stat", statLine(100, "python", 1, 100 + tick, 20, 500, 1000));
      write("101/stat", statLine(101, "pt_data_worker", 100, 50 + tick, 0, 600, 300));
      write("102/stat", statLine(102, "torchrun rank", 101, 10, 0, 700, 200));
      write("200/stat", statLine(200, "other", 1, 1, 1, 800, 50));
      write("stat", `cpu  ${1000 + tick} 0 0 ${9000 + tick} 0 0 0 0 0 0\n`);
    };
    write("meminfo", "MemTotal: 1024 kB\nMemAvailable: 512 kB\n");
    write("not-a-pid/stat", "x");
    processes(0);
    const proc = new ProcFs(root);
    expect([proc.pageSize, proc.clockTicks]).toEqual([4096, 100]);
    let now = 0;
    const trees = createTreeReader(proc, () => now);
    const first = trees.read(100);
    expect(first).toMatchObject({ rootPid: 100, pids: [100, 101, 102], rssBytes: 1500 * 4096, cpuPercent: null });
    processes(50);
    now = 1000;
    expect(trees.read(100).cpuPercent).toBe(100);

    // A new grandchild is found on the next read; a pid reused in place only at the next full rescan.
    write("103/stat", statLine(103, "worker", 102, 0, 0, 900, 10));
    write("200/stat", statLine(200, "reused", 101, 0, 0, 950, 20));
    now = 2000;
    expect(trees.read(100).pids).toEqual([100, 101, 102, 103]);
    now = 6000;
    expect(trees.read(100).pids).toEqual([100, 101, 102, 200, 103]);
    rmSync(join(root, "101"), { recursive: true });
    now = 6100;
    expect(trees.read(100).pids).toEqual([100]);
    const host = createHostReader(proc, () => 0);
    expect(host.read()).toEqual({ memAvailableBytes: 512 * 1024, cpuPercent: null });
    processes(150);
    expect(host.read().cpuPercent).toBe(50);
  });
});

describe("the tree's PSS", () => {
  it("reads one smaps_rollup per call, each pid every 2 s, moves PSS with RSS in between, RSS until measured", () => {
    const root = mkdtempSync(join(tmpdir(), "brim-pss-"));
    const write = (path: string, text: string): void => {
      mkdirSync(join(root, path, ".."), { recursive: true });
      writeFileSync(join(root, path), text);
    };
    // A parent of 1024 pages (4 MiB) with two forked workers of 1024 pages each, mostly shared: PSS 2 MiB each.
    write("100/stat", statLine(100, "python", 1, 0, 0, 500, 1024));
    write("101/stat", statLine(101, "worker", 100, 0, 0, 600, 1024));
    write("102/stat", statLine(102, "worker", 100, 0, 0, 700, 1024));
    for (const pid of [100, 101, 102]) write(`${pid}/smaps_rollup`, "Rss: 4000 kB\nPss: 2048 kB\n");
    let reads = 0;
    class CountingProcFs extends ProcFs {
      override pssBytes(pid: number): number | null {
        reads++;
        return super.pssBytes(pid);
      }
    }
    const counting = new CountingProcFs(root);
    let now = 0;
    const trees = createTreeReader(counting, () => now);
    const MiB = 2 ** 20;
    expect(trees.read(100).pssBytes).toBe(2 * MiB + 2 * 4 * MiB);
    now = 100;
    expect(trees.read(100).pssBytes).toBe(4 * MiB + 4 * MiB);
    now = 200;
    expect(trees.read(100).pssBytes).toBe(6 * MiB);
    expect(reads).toBe(3);
    now = 300;
    expect(trees.read(100).pssBytes).toBe(6 * MiB);
    expect(reads).toBe(3);
    // The parent grows by 256 pages of its own: PSS follows at once, without a new smaps_rollup read.
    write("100/stat", statLine(100, "python", 1, 0, 0, 500, 1280));
    now = 400;
    expect(trees.read(100).pssBytes).toBe(7 * MiB);
    expect(reads).toBe(3);
    now = 2100;
    trees.read(100);
    expect(reads).toBe(4);
    expect(trees.read(100).rssBytes).toBe(3328 * 4096);
    rmSync(root, { recursive: true });
  });
});
