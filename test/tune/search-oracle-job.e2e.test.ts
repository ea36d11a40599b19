import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { Knobs } from "../../src/tune/search.ts";
import { dataWaitSeconds, DEFAULT_ORACLE, peakBytes, stepSeconds, throughput } from "./oracle.ts";
import { scaled } from "../helpers/time.ts";

const python = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const job = "test/jobs/oracle_job.py";

function runJob(knobs: Knobs, args: string[], env: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(python, [job, ...args], {
    env: { ...process.env, PYTHONPATH: "python", BRIM_KNOBS: JSON.stringify(knobs), BRIM_CHANNEL: "", ...env },
    encoding: "utf8",
    timeout: scaled(30_000),
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe.runIf(existsSync(python))("the oracle job (Python) and the oracle (TypeScript) share their curves", () => {
  const cases: Knobs[] = [
    { batch_size: 8 },
    { batch_size: 32, accumulation: 4 },
    { batch_size: 100, num_workers: 2, pin_memory: true },
    { batch_size: 64, precision: "bf16-mixed", num_workers: 8 },
    { batch_size: 200, precision: "tf32", accumulation: 2 },
  ];
  for (const knobs of cases) {
    it(`--describe ${JSON.stringify(knobs)}`, () => {
      const r = runJob(knobs, ["--describe"]);
      expect(r.status, r.stderr).toBe(0);
      const described = JSON.parse(r.stdout) as { step_seconds: number; memory_bytes: number; samples_per_second: number };
      expect(described.step_seconds).toBeCloseTo(stepSeconds(DEFAULT_ORACLE, knobs), 12);
      expect(described.samples_per_second).toBeCloseTo(throughput(DEFAULT_ORACLE, knobs), 6);
      expect(described.memory_bytes).toBe(Math.round(peakBytes(DEFAULT_ORACLE, knobs)));
    });
  }

  it("the data-starved mode: ORACLE_DATA_S builds each batch in the loop; loader workers hide it behind the compute", () => {
    const spec = { ...DEFAULT_ORACLE, dataS: 0.001 };
    for (const knobs of [{ batch_size: 16 }, { batch_size: 16, num_workers: 1 }, { batch_size: 64, num_workers: 2, precision: "bf16-mixed" }] as Knobs[]) {
      const r = runJob(knobs, ["--describe"], { ORACLE_DATA_S: "0.001" });
      expect(r.status, r.stderr).toBe(0);
      const described = JSON.parse(r.stdout) as { step_seconds: number; data_wait_seconds: number };
      expect(described.step_seconds).toBeCloseTo(stepSeconds(spec, knobs), 12);
      expect(described.data_wait_seconds).toBeCloseTo(dataWaitSeconds(spec, knobs), 12);
    }
    expect(dataWaitSeconds(spec, { batch_size: 16 })).toBeCloseTo(0.016, 12);
    expect(dataWaitSeconds(spec, { batch_size: 16, num_workers: 1 })).toBeLessThan(0.002);
  });

  it("constants come from ORACLE_* variables", () => {
    const r = runJob({ batch_size: 10 }, ["--describe"], { ORACLE_KNEE: "inf", ORACLE_PER_SAMPLE_BYTES: "1048576", ORACLE_OVERHEAD_S: "0.01" });
    const described = JSON.parse(r.stdout) as { step_seconds: number; memory_bytes: number };
    const spec = { ...DEFAULT_ORACLE, knee: Infinity, perSampleBytes: 2 ** 20, overheadS: 0.01 };
    expect(described.step_seconds).toBeCloseTo(stepSeconds(spec, { batch_size: 10 }), 12);
    expect(described.memory_bytes).toBe(peakBytes(spec, { batch_size: 10 }));
  });

  it("trains for the step budget and stops; raises MemoryError above ORACLE_OOM_BYTES", () => {
    const ok = runJob({ batch_size: 16 }, [], { BRIM_STEP_BUDGET: "5" });
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stderr).toContain("oracle: 5 steps of micro-batch 16");
    const oom = runJob({ batch_size: 16 }, [], { BRIM_STEP_BUDGET: "5", ORACLE_OOM_BYTES: String(2 ** 20) });
    expect(oom.status).not.toBe(0);
    expect(oom.stderr).toContain("MemoryError");
  });
});
