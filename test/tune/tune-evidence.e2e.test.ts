import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TuneRecord } from "../../src/record/types.ts";

// brim tune as a user runs it (the built CLI, real trial processes) on the oracle job's data-starved
// mode and precision speed-up: the search must find the loader and the precision wins, not only the batch.
const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-tune-evidence-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function tune(name: string, args: string[], env: Record<string, string>): { status: number | null; record: TuneRecord; stderr: string } {
  const store = join(root, name);
  const result = spawnSync(
    process.execPath,
    [
      BRIM,
      "tune",
      "--json",
      "--store",
      store,
      "--cap",
      "512MiB",
      "--warmup",
      "1",
      "--steps",
      "12",
      "--window",
      "2s",
      ...args,
      "--",
      PYTHON,
      join(REPO, "test/jobs/oracle_job.py"),
    ],
    { cwd: root, encoding: "utf8", env: { ...process.env, NO_COLOR: "1", ...env }, timeout: 240_000 },
  );
  return { status: result.status, record: JSON.parse(result.stdout) as TuneRecord, stderr: result.stderr };
}

describe("brim tune finds loader and precision wins on the oracle job (CPU)", () => {
  it("a data-starved loop: a loader worker is tried first, for the data wait it measured, and wins", { timeout: 240_000 }, () => {
    const { status, record, stderr } = tune("starved", ["--max-trials", "8"], { ORACLE_DATA_S: "0.002", ORACLE_KNEE: "inf" });
    expect(status, stderr).toBe(0);
    const first = record.trials.find((t) => t.index === 1);
    expect(first?.knobs.num_workers).toBe(1);
    expect(first?.purpose).toMatch(/the loop waits for data \d+ % of step time/);
    expect(record.trials[0]?.data_wait_share ?? 0).toBeGreaterThan(0.3);
    expect(record.winner?.knobs.num_workers as number).toBeGreaterThanOrEqual(1);
    expect(record.winner?.speedup ?? 0).toBeGreaterThan(1.15);
  });

  it("fp32 with a faster 16-bit precision on offer: precision is tried first and wins", { timeout: 240_000 }, () => {
    const { status, record, stderr } = tune(
      "precision",
      ["--max-trials", "6", "--fix", "num_workers", "--knob", "batch_size=64", "--knob", "precision=fp32,bf16-mixed"],
      {
        ORACLE_PRECISIONS: JSON.stringify({ fp32: { memory: 1, extra_bytes: 0, time: 1 }, "bf16-mixed": { memory: 0.5, extra_bytes: 0, time: 0.5 } }),
        ORACLE_KNEE: "inf",
        // the per-sample time dominates the step, so the precision's gain (×1.5 here) stands well above a loaded machine's noise
        ORACLE_OVERHEAD_S: "0.002",
      },
    );
    expect(status, stderr).toBe(0);
    const first = record.trials.find((t) => t.index === 1);
    expect(first?.knobs.precision).toBe("bf16-mixed");
    expect(first?.purpose).toMatch(/runs fp32/);
    expect(record.winner?.knobs.precision).toBe("bf16-mixed");
  });
});
