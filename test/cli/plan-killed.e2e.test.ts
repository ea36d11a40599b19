// A killed `brim plan -- <command>` leaves no config copy behind (issue 34): the CLI is signalled
// while its first measuring run holds a copy of the job's config with the measured micro-batch
// (`.conf.yaml.brim-plan-…`); SIGINT and SIGTERM are passed to the job and the copy removed as the
// plan fails, SIGKILL leaves it to the watchdog; and a copy an earlier killed plan left (its run in no
// store, a day old) is swept when the next plan starts. Through the built CLI (npm run build), with a slow
// PyTorch job of ours (test/jobs/slow_config_loop.py).
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const JOB = join(REPO, "test", "jobs", "slow_config_loop.py");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-plan-killed-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

async function until(test: () => boolean, timeoutMs: number): Promise<boolean> {
  for (const start = Date.now(); Date.now() - start < timeoutMs; await sleep(100)) if (test()) return true;
  return test();
}

const copiesIn = (dir: string): string[] => readdirSync(dir).filter((name) => name.includes(".brim-"));

/** Starts `brim plan -- python job --config conf.yaml` in a folder of its own; resolves once the job runs on the copy. */
async function plan(
  name: string,
  orphan?: string,
): Promise<{ dir: string; child: ReturnType<typeof spawn>; stderr: () => string; exit: Promise<number | null> }> {
  const dir = join(root, name);
  const marker = join(dir, "started");
  mkdirSync(dir);
  writeFileSync(join(dir, "conf.yaml"), "data:\n  batch_size: 32\n");
  if (orphan !== undefined) {
    writeFileSync(join(dir, orphan), "data:\n  batch_size: 2\n");
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    utimesSync(join(dir, orphan), twoDaysAgo, twoDaysAgo);
  }
  const child = spawn(
    process.execPath,
    [BRIM, "plan", "--store", join(dir, "store"), "--measure-batch", "8", "--steps", "50", "--", PYTHON, JOB, "--config", "conf.yaml"],
    { cwd: dir, env: { ...process.env, SLOW_JOB_STARTED: marker }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let err = "";
  child.stderr?.on("data", (chunk: Buffer) => (err += chunk.toString()));
  child.stdout?.resume();
  const exit = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
  expect(await until(() => existsSync(marker), 60_000), err).toBe(true);
  // the job runs on the copy, which carries the measured micro-batch
  const read = readFileSync(marker, "utf8").trim();
  expect(read).toMatch(/\.conf\.yaml\.brim-plan-\d{8}-\d{6}-[0-9a-f]{4}-0\.yaml$/);
  expect(copiesIn(dir)).toHaveLength(1);
  expect(readFileSync(join(dir, copiesIn(dir)[0] as string), "utf8")).toBe("data:\n  batch_size: 8\n");
  return { dir, child, stderr: () => err, exit };
}

describe("a killed brim plan -- <command>", () => {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    it(`leaves no config copy behind (${signal} mid-measure)`, async () => {
      const orphan = ".conf.yaml.brim-plan-20261101-000000-dead-1.yaml";
      const run = await plan(signal.toLowerCase(), signal === "SIGINT" ? orphan : undefined);
      if (signal === "SIGINT") expect(run.stderr()).toMatch(/removed 1 copy of \S+conf\.yaml that an interrupted tune or plan left/);
      run.child.kill(signal);
      const code = await run.exit;
      expect(code, run.stderr()).not.toBe(0);
      expect(run.stderr()).toMatch(/the measuring run \S+ did not end ok \(interrupted: .*\); nothing is planned/);
      expect(copiesIn(run.dir)).toEqual([]);
      expect(readFileSync(join(run.dir, "conf.yaml"), "utf8")).toBe("data:\n  batch_size: 32\n");
    }, 120_000);
  }

  it("leaves no config copy behind (SIGKILL mid-measure: the watchdog removes it)", async () => {
    const run = await plan("sigkill");
    run.child.kill("SIGKILL");
    await run.exit;
    expect(await until(() => copiesIn(run.dir).length === 0, 30_000), copiesIn(run.dir).join(", ")).toBe(true);
    expect(readFileSync(join(run.dir, "conf.yaml"), "utf8")).toBe("data:\n  batch_size: 32\n");
  }, 120_000);
});
