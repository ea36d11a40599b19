// The fault suite, part 1: brim lost while it guards a job (SIGKILL, SIGHUP), a full store, an escaped
// child holding stdout. Real processes through the built CLI (npm test builds dist/ first).
// BRIM_FAULT_REPEAT repeats each fault; BRIM_FAULT_OUT collects the outcomes (bench/faults.bench.mjs).
import { spawn } from "node:child_process";
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BRIM, canMountTmpfs, fullDisk, groupMembers, hangUpBrim, killBrimKeepJob, killBrimQuietJob, stepsLostOn, until, type FaultOutcome } from "./faults.ts";
import { scaled, timeScale } from "../helpers/time.ts";

const REPEAT = Math.max(1, Number(process.env.BRIM_FAULT_REPEAT ?? 1));
const root = mkdtempSync(join(tmpdir(), "brim-faults-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let trial = 0;
const fresh = (): string => join(root, `t${trial++}`);
const record = <T extends FaultOutcome>(outcome: T): T => {
  if (process.env.BRIM_FAULT_OUT) appendFileSync(process.env.BRIM_FAULT_OUT, `${JSON.stringify({ ...outcome, stderr: undefined })}\n`);
  return outcome;
};
const tmpfs = canMountTmpfs();

describe("brim lost while guarding a job", () => {
  it("SIGKILL of brim with a job that prints nothing: the watchdog stops the job and finishes run.json (supervisor_lost)", async () => {
    for (let i = 0; i < REPEAT; i++) {
      const outcome = record(await killBrimQuietJob(fresh()));
      expect(outcome.orphans).toBe(0);
      expect(outcome.endCause).toBe("supervisor_lost");
      expect(outcome.torn).toBe(0);
    }
  });

  it("--keep-on-supervisor-loss: the job runs on, run.json says it is unguarded, and is finished when the job ends", async () => {
    for (let i = 0; i < REPEAT; i++) {
      const outcome = record(await killBrimKeepJob(fresh()));
      expect(outcome.keptRunning).toBe(true);
      expect(outcome.markedUnguarded).toBe(true);
      expect(outcome.unguarded).toBe(0);
      expect(outcome.endCause).toBe("supervisor_lost");
      expect(outcome.torn).toBe(0);
    }
  });

  it("SIGHUP (terminal closed): brim stops the job, finishes the run, no stack trace", async () => {
    for (let i = 0; i < REPEAT; i++) {
      const outcome = record(await hangUpBrim(fresh()));
      expect(outcome.orphans).toBe(0);
      expect(outcome.endCause).toBe("interrupted");
      expect(outcome.exitCode).toBe(143);
      expect(outcome.stackTrace).toBe(false);
      expect(outcome.torn).toBe(0);
    }
  });
});

describe.skipIf(!tmpfs)("a full store (tmpfs in a private mount namespace)", () => {
  it("full at start: one line, exit 1, nothing left in the store", () => {
    for (let i = 0; i < REPEAT; i++) {
      const outcome = record(fullDisk(fresh(), "32k", 10));
      expect(outcome.stderr).toMatch(/^brim: cannot start a run in the store .*: no space left on the device/m);
      expect(outcome.exitCode).toBe(1);
      expect(outcome.stackTrace).toBe(false);
      expect(outcome.endCause).toBeNull();
      expect(outcome.torn).toBe(0);
    }
  });

  it("read-only at start: one line that says so, exit 1", () => {
    for (let i = 0; i < REPEAT; i++) {
      const outcome = record(fullDisk(fresh(), "1m", 10, true));
      expect(outcome.stderr).toMatch(/^brim: cannot create the run folder .*: read-only file system/m);
      expect(outcome.exitCode).toBe(1);
      expect(outcome.stackTrace).toBe(false);
      expect(outcome.torn).toBe(0);
    }
  });

  it("full mid-run: the job is stopped, run.json finished with store_failed, exit 74, whole lines only", () => {
    for (let i = 0; i < REPEAT; i++) {
      const outcome = record(fullDisk(fresh(), "400k", 50_000));
      expect(outcome.exitCode).toBe(74);
      expect(outcome.endCause).toBe("store_failed");
      expect(outcome.orphans).toBe(0);
      expect(outcome.stackTrace).toBe(false);
      expect(outcome.torn).toBe(0);
      expect(outcome.stderr).toMatch(/no space left on the device/);
    }
  });
});

describe("a child that left the job's process group", () => {
  it("holding brim's stdout does not keep brim from exiting after its summary", async () => {
    const dir = fresh();
    const child = spawn(process.execPath, [BRIM, "run", "--store", join(dir, "store"), "--quiet", "--", "sh", "-c", "setsid sleep 30 & echo escaped $!"], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout?.setEncoding("utf8").on("data", (c: string) => (out += c));
    child.stderr?.resume();
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    const done = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), scaled(8000)))]);
    const escaped = Number(/escaped (\d+)/.exec(out)?.[1] ?? 0);
    if (escaped > 0) for (const pid of groupMembers(escaped)) process.kill(pid, "SIGKILL");
    if (!done) child.kill("SIGKILL");
    expect(done).toBe(true);
    expect(escaped).toBeGreaterThan(0);
    await until(() => escaped === 0 || groupMembers(escaped).length === 0, 2000);
  });
});

describe("steps reported before brim is lost", () => {
  it("SIGHUP: every step the job reported is in the timeline", async () => {
    for (let i = 0; i < REPEAT; i++) {
      const outcome = record(await stepsLostOn(fresh(), "SIGHUP"));
      expect(outcome.stepsReported).toBeGreaterThanOrEqual(40);
      expect(outcome.stepsLost).toBe(0);
      expect(outcome.orphans).toBe(0);
      expect(outcome.torn).toBe(0);
    }
  });

  it("SIGKILL: the job is stopped and at most the steps brim had not yet read are lost", async () => {
    for (let i = 0; i < REPEAT; i++) {
      const outcome = record(await stepsLostOn(fresh(), "SIGKILL"));
      expect(outcome.orphans).toBe(0);
      expect(outcome.endCause).toBe("supervisor_lost");
      // Not yet read: the steps in flight to brim, and those the job holds for at most SEND_EVERY_S
      // (50 ms, python/brim/_tracking.py) before one write — about 5 at this job's 100 steps/s on an idle
      // machine; how many are in flight grows with how long brim waits for a core, so the bound grows
      // with the machine's load as the time limits do (10 were lost beside a busy core on 2 cores)
      expect(outcome.stepsLost).toBeLessThanOrEqual(Math.ceil(8 * timeScale()));
      expect(outcome.torn).toBe(0);
    }
  });
});
