import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TuneRecord } from "../../src/record/types.ts";
import { scaled } from "../helpers/time.ts";

// Loss parity through a real tune (the built CLI, a real PyTorch MLP with a seeded, shuffled loader):
// your configuration 4 × 4 against the winner 16 × 1, the effective batch held at 16. The grid of
// given values makes 16 × 1 the one candidate, and the job waits 15 ms a micro-batch, so it is the
// search's best by construction; what is asserted is the parity of the confirmation's runs, which
// holds whatever the confirmation's speedup verdict. PyTorch's threads (cpu_threads, tried first beside
// busy cores) are fixed, or the grid's one candidate would change them too.
const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const JOB = join(REPO, "test", "jobs", "parity_mlp.py");
const root = mkdtempSync(join(tmpdir(), "brim-parity-e2e-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// torch installed, found without importing it (the import alone costs seconds of CPU)
const FIND_TORCH = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)";
const python = [process.env.BRIM_TEST_PYTHON, join(REPO, ".venv", "bin", "python"), "/usr/bin/python3"].find(
  (candidate): candidate is string => candidate !== undefined && existsSync(candidate) && spawnSync(candidate, ["-c", FIND_TORCH]).status === 0,
);
if (python === undefined) console.warn("skipped: no interpreter with torch (set BRIM_TEST_PYTHON)");

function tune(name: string, jobArgs: string[]): { stdout: string; record: TuneRecord } {
  const store = join(root, name);
  const result = spawnSync(
    process.execPath,
    [
      BRIM,
      ...[
        "tune",
        "--store",
        store,
        "--quiet",
        "--strategy",
        "grid",
        "--knob",
        "batch_size=4,16",
        "--fix",
        "num_workers",
        "--fix",
        "cpu_threads",
        "--max-trials",
        "2",
        "--steps",
        "20",
        // the three-step rule of a window given: the losses compared are asserted, not how long a trial waits for its noise
        "--window",
        "10s",
      ],
      ...["--", python as string, JOB, "--batch-size", "4", "--accumulation", "4", "--sleep-ms", "15", ...jobArgs],
    ],
    { cwd: root, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" }, timeout: scaled(540_000) },
  );
  expect(result.status === 0 || result.status === 3, result.stderr).toBe(true);
  const [id] = readdirSync(join(store, "tunes"));
  // the closing lines wrap at the terminal's width, their continuation indented by two spaces
  return {
    stdout: result.stdout.replace(/\n {2}/g, " "),
    record: JSON.parse(readFileSync(join(store, "tunes", id as string, "tune.json"), "utf8")) as TuneRecord,
  };
}

describe.skipIf(python === undefined)("loss parity in a real tune's confirmation", () => {
  it("a held effective batch on a plain MLP: the losses match within 1e-5 over the steps seen (fp32), printed and stored", { timeout: scaled(600_000) }, () => {
    const { stdout, record } = tune("plain", []);
    const parity = record.parity;
    expect(parity, stdout).toBeDefined();
    expect(parity).toMatchObject({
      verdict: "match",
      effective_batch: { before: 16, after: 16, held: true },
      precisions: { baseline: "fp32", winner: "fp32" },
      evidence: [],
    });
    expect(parity?.steps).toBeGreaterThanOrEqual(5);
    expect(parity?.max_diff).toBeLessThan(1e-5);
    expect(record.trials.find((t) => t.index === parity?.winner_trial)?.knobs).toMatchObject({ batch_size: 16, accumulation: 1 });
    expect(stdout).toContain(parity?.line);
    expect(stdout).toMatch(/same model: the first \d+ steps' losses match your configuration's within 1e-4/);
  });

  it("BatchNorm and a learning rate scaled from the micro-batch: where they part, and both named with their evidence", { timeout: scaled(600_000) }, () => {
    const { stdout, record } = tune("batchnorm-lr", ["--batchnorm", "--lr-per-sample", "0.0125"]);
    const parity = record.parity;
    expect(parity?.verdict, stdout).toBe("parted");
    expect(parity?.line).toMatch(
      /^not the same losses: they part at step \d+ \(yours [\d.]+, the winner's [\d.]+, [\d.]+ % apart \(tolerance 1e-4\)\): expected: the model has BatchNorm/,
    );
    expect(parity?.evidence.map((e) => e.kind)).toEqual(["lr", "batch_norm"]);
    expect(parity?.evidence[0]?.text).toMatch(/^learning rate moved with the batch size: 0\.05 in your configuration, 0\.2 in the winner's \(×4\.00\)/);
    expect(parity?.evidence[1]?.text).toMatch(/BatchNorm1d ×1, in training mode.*yours 4, the winner's 16/);
    expect(stdout).toContain("learning rate moved with the batch size");
  });
});
