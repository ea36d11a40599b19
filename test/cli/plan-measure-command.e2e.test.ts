import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

// `brim plan --measure -- <command>` with no model spec, through the built CLI on a real job.
const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const store = mkdtempSync(join(tmpdir(), "brim-plan-measure-"));
afterAll(() => rmSync(store, { recursive: true, force: true }));

const plan = (...args: string[]) =>
  spawnSync(process.execPath, [BRIM, "plan", "--measure", "--store", store, ...args], { encoding: "utf8", timeout: scaled(180_000) });

describe("brim plan --measure -- <command>", () => {
  it("needs no spec: fills {batch_size}, measures the job's peak at it and plans against this machine's memory", () => {
    const r = plan(
      "--json",
      "--measure-batch",
      "24",
      "--",
      PYTHON,
      join(REPO, "test", "jobs", "plain_loop.py"),
      "--max-steps",
      "1000",
      "--batch-size",
      "{batch_size}",
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/measuring the job at micro-batch 24 for 6 steps: .*--batch-size 24$/m);
    const p = JSON.parse(r.stdout) as {
      micro_batch: number;
      steps: number;
      peak_bytes: number;
      fits: boolean;
      largest_micro_batch_at_least: number;
      command: string[];
    };
    expect(p.command).toContain("24");
    expect(p.micro_batch).toBe(24); // what the attach saw the job's DataLoader give
    expect(p.steps).toBe(6);
    expect(p.peak_bytes).toBeGreaterThan(10 * 2 ** 20);
    expect(p.fits).toBe(true);
    expect(p.largest_micro_batch_at_least).toBeGreaterThan(24);
  });

  it("prints the crashed job's last lines and exits non-zero", () => {
    const r = plan("--", PYTHON, "-c", "import sys; print('loading data'); sys.exit('bad config: no such file data.csv')");
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/\| loading data\n {2}\| bad config: no such file data\.csv\n/);
    expect(r.stderr).toMatch(/crashed: .*its last lines are printed above\); nothing is planned/);
  });

  it("refuses a template it has no value for, in one line", () => {
    const r = plan("--", PYTHON, "train.py", "--bs", "{batch_size}");
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toBe(
      "brim: the command uses {batch_size} and brim plan has no value for it: give the micro-batch to measure with --measure-batch <n>",
    );
  });
});
