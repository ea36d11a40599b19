import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TuneRecord } from "../../src/record/types.ts";
import { expectRecordDecides } from "../helpers/tune-record.ts";
import { scaled } from "../helpers/time.ts";

// brim tune as a user runs it (the built CLI, real trial processes) on the oracle job's data-starved
// mode and precision speed-up: the evidence the baseline gives (its data wait, the precision in force)
// reaches the search, which tries the loader and the precision knobs on the real job. Which of them wins
// is decided on simulated trials (search-evidence.test.ts), never on this machine's speed today.
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
    { cwd: root, encoding: "utf8", env: { ...process.env, NO_COLOR: "1", ...env }, timeout: scaled(240_000) },
  );
  return { status: result.status, record: JSON.parse(result.stdout) as TuneRecord, stderr: result.stderr };
}

describe("brim tune finds loader and precision wins on the oracle job (CPU)", () => {
  it("a data-starved loop: the data wait is measured, cited as measured, and loader workers are tried on the real job", { timeout: scaled(240_000) }, () => {
    // the baseline and the trial its data wait calls for (loader workers, tried first on that evidence);
    // a winner among them is still confirmed against the baseline
    const { status, record, stderr } = tune("starved", ["--max-trials", "2"], { ORACLE_DATA_S: "0.002", ORACLE_KNEE: "inf" });
    expect(status, stderr).toBe(0);
    const wait = record.trials[0]?.data_wait_share;
    expect(typeof wait).toBe("number");
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(1);
    // a trial chosen for the wait cites the wait trial 0 measured
    for (const trial of record.trials) {
      const cited = /the loop waits for data (\d+) % of step time/.exec(trial.purpose)?.[1];
      if (cited !== undefined) expect(Number(cited)).toBe(Math.round((wait as number) * 100));
    }
    const workers = record.trials.filter((t) => typeof t.knobs.num_workers === "number" && t.knobs.num_workers >= 1);
    expect(workers.some((t) => t.end === "ok" || t.end === "slower")).toBe(true);
    expectRecordDecides(record);
  });

  it("fp32 with a 16-bit precision on offer: the precision in force is the evidence, and 16-bit is tried first", { timeout: scaled(240_000) }, () => {
    const { status, record, stderr } = tune(
      "precision",
      // the baseline and trial 1, the one the precision in force calls for (a winner is still confirmed)
      ["--max-trials", "2", "--fix", "num_workers", "--knob", "batch_size=64", "--knob", "precision=fp32,bf16-mixed"],
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
    expect(first?.end === "ok" || first?.end === "slower").toBe(true);
    expectRecordDecides(record);
  });
});
