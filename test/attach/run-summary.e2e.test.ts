// What `brim run` prints around the job: with `--steps 3` on a job of slow (2 s) steps and the default --warmup 3 every step
// counted is warm-up, and the summary says so, with what to change, instead of a bare "no steady
// steps"; with `--json` stdout holds the record alone and the job's own output goes to stderr.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";
import { hasModules } from "../helpers/python.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const VENV = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? (existsSync(VENV) ? VENV : "/usr/bin/python3");
const hasTorch = hasModules(PYTHON, "torch");
const root = mkdtempSync(join(tmpdir(), "brim-run-warmup-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe.skipIf(!hasTorch)("a run whose every step is warm-up", () => {
  it(
    "gives the reason for 'no steady steps' in the summary",
    () => {
      const result = spawnSync(
        process.execPath,
        [
          join(REPO, "bin", "brim.js"),
          "run",
          "--store",
          join(root, "store"),
          "--steps",
          "3",
          "--",
          PYTHON,
          join(REPO, "test", "jobs", "open_progress_line.py"),
          "--step-s",
          "2",
        ],
        { encoding: "utf8", env: { ...process.env, NO_COLOR: "1" }, timeout: scaled(120_000) },
      );
      expect(result.status, result.stderr).toBe(0);
      const text = result.stderr.replace(/\s+/g, " ");
      expect(text).toMatch(/no steady steps reported: all 3 steps were warm-up, left out of throughput \(the first --warmup steps/);
      expect(text).toMatch(
        /run more steps than --warmup \(--steps\), e\.g\. --steps 13 for 10 steady steps, or lower --warmup \(--warmup 1 where each step is slow\)/,
      );
    },
    scaled(150_000),
  );

  it(
    "with --json keeps the job's own output, on stderr, and the record alone on stdout",
    () => {
      const result = spawnSync(
        process.execPath,
        [
          join(REPO, "bin", "brim.js"),
          "run",
          "--json",
          "--store",
          join(root, "store"),
          "--steps",
          "12",
          "--",
          PYTHON,
          join(REPO, "test", "jobs", "plain_loop.py"),
          "--log-every",
          "5",
        ],
        { encoding: "utf8", env: { ...process.env, NO_COLOR: "1" }, timeout: scaled(120_000) },
      );
      expect(result.status, result.stderr).toBe(0);
      const record = JSON.parse(result.stdout) as { summary: { steps: number } };
      expect(record.summary.steps).toBe(12);
      expect(result.stderr).toMatch(/epoch \d+ step 5 \| loss/);
    },
    scaled(150_000),
  );
});
