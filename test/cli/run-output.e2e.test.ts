// What `brim run` (the built CLI, a real job) prints around the job's own output off a terminal:
// brim's lines always start a line of their own, also after a progress bar's unfinished `\r` line
// that the step budget cut, and also when stdout and stderr go to one file (`> log 2>&1`, where a
// Keras-style bar on stdout leaves the line open); a short --prometheus-token is refused saying the rule.
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const VENV = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? (existsSync(VENV) ? VENV : "/usr/bin/python3");
const JOB = join(REPO, "test", "jobs", "open_progress_line.py");
// installed, found without importing it (an import of torch alone costs seconds of CPU)
const hasTorch =
  spawnSync(PYTHON, ["-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"], { encoding: "utf8" }).status === 0;
const root = mkdtempSync(join(tmpdir(), "brim-run-output-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Every line brim writes (its status lines and summary) starts at the start of a line. */
function expectBrimLinesOnTheirOwn(text: string): void {
  const glued = [...text.matchAll(/[^\n]brim: (step|run) /g)].map((m) => JSON.stringify(text.slice(Math.max(0, (m.index ?? 0) - 40), (m.index ?? 0) + 30)));
  expect(glued, "brim lines glued to the job's unfinished line").toEqual([]);
}

describe.skipIf(!hasTorch)("brim run off a terminal, around a progress bar that never ends its line", () => {
  it(
    "starts its status lines and its summary on lines of their own (bar on stderr, cut by the step budget)",
    () => {
      const args = ["run", "--store", join(root, "store"), "--steps", "24", "--", PYTHON, JOB, "--step-s", "0.5"];
      const result = spawnSync(process.execPath, [BRIM, ...args], { encoding: "utf8", env: { ...process.env, NO_COLOR: "1" }, timeout: scaled(120_000) });
      expect(result.status, result.stderr).toBe(0);
      // the last status line may come between the bar and the summary: both on lines of their own
      expect(result.stderr).toMatch(/\rstep 24\/99999\n(brim: step [^\n]*\n)?brim: run \S+ ended: ok/);
      expectBrimLinesOnTheirOwn(result.stderr);
    },
    scaled(150_000),
  );

  it(
    "starts its summary on a line of its own when a bar on stdout left the line open and both streams go to one file",
    () => {
      const log = join(root, "both.log");
      const fd = openSync(log, "w");
      try {
        const args = ["run", "--quiet", "--store", join(root, "store"), "--steps", "5", "--", PYTHON, JOB, "--stream", "stdout"];
        const result = spawnSync(process.execPath, [BRIM, ...args], {
          stdio: ["ignore", fd, fd],
          env: { ...process.env, NO_COLOR: "1" },
          timeout: scaled(120_000),
        });
        expect(result.status).toBe(0);
      } finally {
        closeSync(fd);
      }
      const text = readFileSync(log, "utf8");
      expect(text).toMatch(/\rstep 5\/99999\nbrim: run \S+ ended: ok/);
      expectBrimLinesOnTheirOwn(text);
    },
    scaled(150_000),
  );
});

describe("brim run --prometheus-token", () => {
  it("refuses a token under 16 characters on an address other machines reach, saying the rule, before the job starts", () => {
    const args = [
      "run",
      "--store",
      join(root, "store"),
      "--prometheus",
      "0.0.0.0:9499",
      "--prometheus-token",
      "short-token",
      "--",
      PYTHON,
      "-c",
      "print('ran')",
    ];
    const result = spawnSync(process.execPath, [BRIM, ...args], { encoding: "utf8", env: { ...process.env, NO_COLOR: "1" }, timeout: scaled(60_000) });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/--prometheus-token is 11 characters long: .* needs 16 or more \(a short one can be guessed\)/);
    expect(result.stdout).not.toContain("ran");
    const help = spawnSync(process.execPath, [BRIM, "run", "--help"], { encoding: "utf8", timeout: scaled(60_000) });
    expect(help.stdout.replace(/\s+/g, " ")).toMatch(/--prometheus-token <token>.*16 characters or more/);
  });
});
