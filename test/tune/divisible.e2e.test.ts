// A job of ours that derives its accumulation from a token budget (test/jobs/budget_accum.py), run
// for real: a micro-batch that does not divide the budget ends it with the job's own assertion, which
// divisibilityFailure reads from its output; one of the divisors runs.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { divisibilityFailure, dividingMicroBatches } from "../../src/tune/divisible.ts";
import { hasModules } from "../helpers/python.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const VENV = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? (existsSync(VENV) ? VENV : "/usr/bin/python3");
const hasTorch = hasModules(PYTHON, "torch");
const JOB = join(REPO, "test", "jobs", "budget_accum.py");

describe.skipIf(!hasTorch)("a budget-derived accumulation", () => {
  it("a micro-batch that does not divide dies on the job's assertion, read as such; a divisor runs", () => {
    const T = 64;
    const bad = spawnSync(PYTHON, [JOB, "--total-batch-size", "4096", "-B", "6", "-T", String(T), "--steps", "2"], { encoding: "utf8" });
    expect(bad.status).not.toBe(0);
    expect(divisibilityFailure(bad.stderr.split("\n").filter((line) => line !== ""))).toMatch(/divisible|%/);
    const perSequence = dividingMicroBatches(4096 / T, 1, { min: 5, max: 12 });
    expect(perSequence).toEqual([8]);
    const good = spawnSync(PYTHON, [JOB, "--total-batch-size", "4096", "-B", String(perSequence[0]), "-T", String(T), "--steps", "10"], { encoding: "utf8" });
    expect(good.status, good.stderr).toBe(0);
    expect(good.stdout).toMatch(/8 micro-steps of 8 x 64/);
  });
});
