import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

// A trial that makes no step at all is not just "slow": at its time limit brim asks the job for its
// Python stacks before ending it, and the trial's failure says where it was stuck. Built CLI, real job.
const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-trial-stuck-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("brim tune on a job stuck before its first step", () => {
  it(
    "dumps the stuck trial's stacks at the time limit and names the line in the failure",
    () => {
      const store = join(root, "store");
      const result = spawnSync(
        process.execPath,
        [
          BRIM,
          "tune",
          "--json",
          "--quiet",
          "--store",
          store,
          "--trial-time",
          "6s",
          "--max-trials",
          "2",
          "--knob",
          "batch_size=4,8",
          "--",
          PYTHON,
          join(REPO, "test/jobs/stuck_at_start.py"),
          "{batch_size}",
        ],
        { cwd: root, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" }, timeout: scaled(120_000) },
      );
      expect(result.status, result.stderr).not.toBe(0);
      const record = JSON.parse(result.stdout) as { trials: { failure: { kind: string; cause: string } | null }[] };
      const failure = record.trials[0]?.failure;
      expect(failure?.kind).toBe("time_limit");
      expect(failure?.cause).toMatch(/^no training step within the trial time limit of 6 s; stuck at .*stuck_at_start\.py", line 11 in start_up/);
      const file = /every thread's stack: ([^)]+)\)/.exec(failure?.cause ?? "")?.[1] ?? "";
      expect(existsSync(file)).toBe(true);
      expect(readFileSync(file, "utf8")).toMatch(/stuck_at_start\.py", line 16 in <module>/);
    },
    scaled(120_000),
  );
});
