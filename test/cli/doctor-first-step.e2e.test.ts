// `brim doctor` on a real run whose first step never finished (a closure optimizer, LBFGS, evaluating
// again and again inside one optimizer.step(), in a job with no DataLoader), interrupted as a user
// would with Ctrl-C: the advice comes from what was seen (no loader, no step, a busy process), not
// `brim.track(loader)` for a script that has no loader.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { DoctorReport } from "../../src/analyze/doctor/index.ts";
import { scaled } from "../helpers/time.ts";
import { hasModules } from "../helpers/python.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const VENV = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? (existsSync(VENV) ? VENV : "/usr/bin/python3");
const hasTorch = hasModules(PYTHON, "torch");
const root = mkdtempSync(join(tmpdir(), "brim-doctor-first-step-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Runs the job under `brim run` and interrupts brim once the job is inside its first optimizer step. */
async function interruptedInFirstStep(store: string): Promise<string> {
  const child = spawn(process.execPath, [BRIM, "run", "--store", store, "--", PYTHON, join(REPO, "test", "jobs", "closure_first_step.py")], {
    env: { ...process.env, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
  await new Promise<void>((inside, failed) => {
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      if (/closure pass 5\n/.test(stdout)) inside();
    });
    child.on("exit", () => failed(new Error(`brim ended before the job's first step began:\n${stderr}`)));
  });
  expect(stdout).not.toMatch(/step 1 done/);
  child.kill("SIGINT");
  expect(await exited, stderr).toBe(130);
  const [id] = readdirSync(join(store, "runs"));
  if (id === undefined) throw new Error(`no run recorded:\n${stderr}`);
  return id;
}

describe.skipIf(!hasTorch)("brim doctor on a run whose first step never finished", () => {
  it(
    "says what brim saw and advises a longer run, not brim.track(loader) for a job with no loader",
    async () => {
      const store = join(root, "store");
      const id = await interruptedInFirstStep(store);
      const doctor = spawnSync(process.execPath, [BRIM, "doctor", "--store", store, "--json", id], { encoding: "utf8", timeout: scaled(60_000) });
      expect(doctor.status, doctor.stderr).toBe(0);
      const report = JSON.parse(doctor.stdout) as DoctorReport;
      const note = report.notes.join(" ");
      expect(note).toMatch(/^No step was counted in the job's .* before it was interrupted: no optimizer step finished, no DataLoader was built/);
      expect(note).toMatch(/closure optimizer \(LBFGS\) runs many forward and backward passes inside one optimizer\.step\(\)/);
      expect(note).toMatch(/Run it longer, past its first steps/);
      const dataWait = report.not_evaluated.find((n) => n.check === "data_starved");
      expect(dataWait?.reason).toBe("no step was counted (see the note above)");
      expect(JSON.stringify(report)).not.toContain("brim.track(loader)");
    },
    scaled(180_000),
  );
});
