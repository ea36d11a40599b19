// A job of ours whose DataLoader workers come from a flag brim has no name for (`--threads`, argparse
// dest `threads`, test/jobs/threads_flag.py): the attach says where num_workers comes from, and brim
// tune, built and run for real, binds the workers to that flag from trial 0, and a trial's value is
// written there.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TuneRecord } from "../../src/record/types.ts";
import { rewriteArgv } from "../../src/knobs/argv.ts";
import { hasModules } from "../helpers/python.ts";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const VENV = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? (existsSync(VENV) ? VENV : "/usr/bin/python3");
const hasTorch = hasModules(PYTHON, "torch");
const JOB = join(REPO, "test", "jobs", "threads_flag.py");
const root = mkdtempSync(join(tmpdir(), "brim-workers-flag-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const brim = (args: string[]) =>
  spawnSync(process.execPath, [BRIM, ...args], { cwd: root, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" }, timeout: scaled(280_000) });

describe.skipIf(!hasTorch)("loader workers under a flag brim does not know", () => {
  it("are bound to --threads from trial 0, and a trial's value is written there", { timeout: scaled(300_000) }, () => {
    const store = join(root, "store");
    const command = [PYTHON, JOB, "--threads", "0", "--load-ms", "4"];
    const r = brim(["tune", "--store", store, "--max-trials", "1", "--steps", "4", "--fix", "cpu_threads", "--fix", "batch_size", "--", ...command]);
    expect([0, 3], r.stderr).toContain(r.status);
    expect(r.stderr).toMatch(/num_workers=0 comes from --threads on the command line \(num_workers=args\.threads at \S*threads_flag\.py:\d+\)/);
    const [id] = readdirSync(join(store, "tunes"));
    const record = JSON.parse(readFileSync(join(store, "tunes", id as string, "tune.json"), "utf8")) as TuneRecord;
    const binding = record.bindings.find((b) => b.knob === "num_workers");
    expect(binding).toMatchObject({ via: "argv", flag: "--threads", index: 2, form: "separate", value: 0 });
    expect(record.trials[0]?.knobs.num_workers).toBe(0);
    // a trial of 4 workers runs the command with --threads 4 (the argv rewrite every flag knob goes through)
    const found = { knob: "num_workers", index: 2, form: "separate" as const, flag: "--threads", value: 0 };
    expect(rewriteArgv(command, [found], { num_workers: 4 })).toEqual([PYTHON, JOB, "--threads", "4", "--load-ms", "4"]);
  });
});
