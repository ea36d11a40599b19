// A job that double-forks a daemon (fork, setsid, fork, the middle one exits): through real processes.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openDevices } from "../../src/devices/index.ts";
import { guardRun } from "../../src/guard/guard.ts";
import { RunStore } from "../../src/record/store.ts";
import type { TimelineEntry } from "../../src/record/types.ts";
import { noteOutcome } from "../helpers/outcomes.ts";
import { scaled } from "../helpers/time.ts";

const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-escapes-"));
const MiB = 2 ** 20;
const strays: number[] = [];
afterAll(() => {
  for (const pid of strays) if (running(pid)) process.kill(pid, "SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

/** The job: double-forks a daemon that holds `mib` MiB and sleeps; writes its pid to `pidFile`; the job itself runs on `jobS` seconds. */
function daemonJob(pidFile: string, mib: number, jobS: number): string[] {
  const script = `
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        held = bytearray(${mib} * 1024 * 1024)
        for i in range(0, len(held), 4096):
            held[i] = 1
        with open(${JSON.stringify(pidFile)}, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(600)
    os._exit(0)
os.wait()
time.sleep(${jobS})
print("job done")
`;
  return [PYTHON, "-c", script];
}

function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

function daemonPid(pidFile: string): number {
  const pid = Number(readFileSync(pidFile, "utf8"));
  strays.push(pid);
  return pid;
}

describe("a job that double-forks a daemon", () => {
  it(
    "the daemon is counted in the tree, named in the record, and gone after the run",
    async () => {
      const pidFile = join(root, "daemon-1.pid");
      const store = new RunStore(join(root, "store-1"));
      const result = await guardRun(
        { command: daemonJob(pidFile, 120, 3), cwd: root, capBytes: null, killGraceS: 2, hz: 10 },
        { devices: openDevices(), store },
      );
      const pid = daemonPid(pidFile);
      noteOutcome(
        "a job that double-forks a daemon (fork, setsid, fork) holding 120 MiB: daemon still running after the run",
        1,
        running(pid) ? 1 : 0,
        "test/guard/escapes.e2e.test.ts",
      );
      expect(running(pid)).toBe(false);
      expect(result.meta.end?.cause).toBe("ok");
      expect(result.meta.end?.message).toMatch(new RegExp(`1 process left behind by the job was stopped \\(pid ${pid}: .*python`));
      const events = result.timeline.events;
      expect(events.find((e) => e.event === "process_left_group")?.pid).toBe(pid);
      expect(events.find((e) => e.event === "left_behind_stopped")?.details).toMatchObject({ processes: [{ pid }] });
      // The tree's memory includes the daemon's 120 MiB (the job alone is a few MiB of Python).
      expect(result.summary.peak_tree_rss_bytes ?? 0).toBeGreaterThan(120 * MiB);
    },
    scaled(60_000),
  );

  it(
    "the cap counts the daemon: a tree over the cap only through it is stopped",
    async () => {
      const pidFile = join(root, "daemon-2.pid");
      const store = new RunStore(join(root, "store-2"));
      const result = await guardRun(
        { command: daemonJob(pidFile, 160, 30), cwd: root, capBytes: 100 * MiB, killGraceS: 2, hz: 10, shrink: false },
        { devices: openDevices(), store },
      );
      const pid = daemonPid(pidFile);
      noteOutcome(
        "a daemon alone past a 100 MiB cap: not stopped by the cap",
        1,
        result.meta.end?.cause === "cap_exceeded" && !running(pid) ? 0 : 1,
        "test/guard/escapes.e2e.test.ts",
      );
      expect(result.meta.end?.cause).toBe("cap_exceeded");
      expect(result.meta.end?.message).toMatch(/1 process left behind by the job was stopped/);
      expect(running(pid)).toBe(false);
      expect(result.job.endedAt - result.job.startedAt).toBeLessThan(25);
    },
    scaled(60_000),
  );

  it(
    "--leave-daemons: left running, and the record says so",
    async () => {
      const pidFile = join(root, "daemon-3.pid");
      const store = new RunStore(join(root, "store-3"));
      const result = await guardRun(
        { command: daemonJob(pidFile, 1, 2), cwd: root, capBytes: null, killGraceS: 2, hz: 10, leaveDaemons: true },
        { devices: openDevices(), store },
      );
      const pid = daemonPid(pidFile);
      expect(running(pid)).toBe(true);
      expect(result.meta.end?.message).toMatch(new RegExp(`1 process left behind by the job still runs \\(pid ${pid}`));
      const entries = readFileSync(join(store.runDir(result.meta.id), "timeline.ndjson"), "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as TimelineEntry);
      expect(entries.some((e) => e.kind === "event" && e.event === "left_behind_running")).toBe(true);
      process.kill(pid, "SIGKILL");
    },
    scaled(60_000),
  );
});

describe("brim killed while a job's daemon runs", () => {
  it(
    "the watchdog stops the job's group and the daemon, and says so in run.json",
    async () => {
      const { spawn } = await import("node:child_process");
      const { REPO, runDirOf, until } = await import("../reliability/faults.ts");
      const pidFile = join(root, "daemon-4.pid");
      const storeDir = join(root, "store-4");
      const brim = spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          join(REPO, "test", "dashboard", "cli-fixture.ts"),
          "run",
          "--quiet",
          "--grace",
          "1",
          "--store",
          storeDir,
          "--",
          ...daemonJob(pidFile, 1, 60),
        ],
        { cwd: REPO, stdio: "ignore" },
      );
      expect(await until(() => runDirOf(storeDir) !== null && existsSync(pidFile) && readFileSync(pidFile, "utf8") !== "", 30_000)).toBe(true);
      const pid = daemonPid(pidFile);
      brim.kill("SIGKILL");
      const checked = (): void =>
        noteOutcome("SIGKILL of brim run while the job's daemon runs: daemon left running", 1, running(pid) ? 1 : 0, "test/guard/escapes.e2e.test.ts");
      const runJson = join(runDirOf(storeDir) as string, "run.json");
      const ended = (): { end: { cause: string; message: string } | null } =>
        JSON.parse(readFileSync(runJson, "utf8")) as { end: { cause: string; message: string } | null };
      expect(await until(() => ended().end !== null, 20_000)).toBe(true);
      checked();
      expect(running(pid)).toBe(false);
      expect(ended().end?.cause).toBe("supervisor_lost");
      expect(ended().end?.message).toMatch(/and 1 process\(es\) it had left behind/);
    },
    scaled(60_000),
  );
});
