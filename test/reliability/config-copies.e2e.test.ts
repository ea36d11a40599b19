// A killed `brim plan -- <command>` or `brim tune` leaves no config copy behind: the copy that carries a
// measuring run's or a trial's values is handed to the run's watchdog, which removes it when brim is
// lost (SIGKILL included), as it stops the job. Real processes through the built CLI (npm test builds
// dist/ first).
import { spawn } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-config-copies-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: string, ok: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await sleep(200);
  }
}
/** A process whose command line names a copy with this mark: the job a run started on it. */
const onCopy = (mark: string) =>
  readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .some((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, "utf8").includes(mark);
      } catch {
        return false;
      }
    });

/** Starts brim on test/jobs/copy_waits.py in a folder of its own, kills it with SIGKILL once a job waits on a copy, and checks what is left. */
async function killWhileOnCopy(name: string, args: string[], mark: string): Promise<string> {
  const dir = join(root, name);
  cpSync(join(REPO, "test", "jobs", "copy_waits.py"), join(dir, "copy_waits.py"), { recursive: true });
  const config = "# our own config\nbatch_size: 16\n";
  writeFileSync(join(dir, "conf.yaml"), config);
  const brim = spawn(process.execPath, [BRIM, ...args, "--store", join(root, `${name}-store`), "--", PYTHON, "copy_waits.py", "--config", "conf.yaml"], {
    cwd: dir,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  let exited: number | null = null;
  brim.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  brim.on("exit", (code) => (exited = code ?? -1));
  const copies = () => readdirSync(dir).filter((n) => n.includes(mark));
  // the job waits at any batch size but its config's own 16: a run on a copy with another value
  await until(
    "a job waiting on a config copy",
    () => {
      if (exited !== null) throw new Error(`brim ${args[0]} ended (${exited}) before a job waited on a copy:\n${stderr}`);
      return copies().length >= 1 && onCopy(mark);
    },
    scaled(180_000),
  );
  brim.kill("SIGKILL");
  await until("the copies removed after brim was killed", () => copies().length === 0, scaled(30_000));
  await until("the job on the copy stopped", () => !onCopy(mark), scaled(30_000));
  expect(readFileSync(join(dir, "conf.yaml"), "utf8")).toBe(config);
  return stderr;
}

describe("brim killed while a config copy is in use", () => {
  it("brim plan -- <command>, SIGKILL mid-measure: the watchdog stops the job and removes the copy", { timeout: scaled(300_000) }, async () => {
    const stderr = await killWhileOnCopy("plan", ["plan"], ".brim-plan-");
    expect(stderr).toMatch(/^brim: measuring the job at micro-batch \d+ for \d+ steps: .*\.conf\.yaml\.brim-plan-/m);
  });

  it("brim tune, SIGKILL mid-trial: the watchdog stops the trial and removes its copy", { timeout: scaled(300_000) }, async () => {
    const stderr = await killWhileOnCopy("tune", ["tune", "--knob", "batch_size=16,8", "--max-trials", "2", "--quiet"], ".brim-trial-");
    // trial 0 runs your configuration through a copy too: killed there or in trial 1, no copy is left
    expect(stderr).toMatch(/^brim: trial 0\/2 batch_size=16 — baseline$/m);
  });
});
