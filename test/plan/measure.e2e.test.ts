// `brim plan --measure -- <command>`: one calibrating trial through brim's own run machinery, with a
// real child process (the N-BEATS example on CPU, RAM as the budget): the plan is re-anchored on the
// measured peak, and says so; a trial that fails leaves the plan alone and says why.
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import type { PlanReport } from "../../src/plan/planner.ts";
import { scaled } from "../helpers/time.ts";

const PYTHON = process.env["BRIM_TEST_PYTHON"] ?? "/usr/bin/python3";
const root = new URL("../../", import.meta.url).pathname;
const store = mkdtempSync(join(tmpdir(), "brim-measure-"));

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await main(args, { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t) });
  return { code, stdout, stderr };
}

describe("brim plan --measure", () => {
  it(
    "runs the example job briefly on CPU, measures its RAM peak at the plan's micro-batch and re-anchors the plan",
    async () => {
      const r = await cli([
        "plan",
        join(root, "examples/nbeats/model.yaml"),
        "--gpu-memory",
        "4",
        "--batch",
        "64",
        "--json",
        "--measure",
        "--steps",
        "3",
        "--store",
        store,
        "--",
        PYTHON,
        join(root, "examples/nbeats/train.py"),
        "--config",
        join(root, "examples/nbeats/config.yaml"),
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain("brim: measuring the job at micro-batch 64 (fp32) for 3 steps");
      const report = JSON.parse(r.stdout) as PlanReport;
      const trial = report.trial!;
      expect(trial).toMatchObject({ micro_batch: 64, precision: "fp32", memory: "ram" });
      expect(trial.peak_bytes).toBeGreaterThan(100 * 2 ** 20);
      expect(trial.source).toMatch(/^run \d{8}-\d{6}-[0-9a-f]+, 3 steps/);
      // at the measured micro-batch the plan now says what was measured (to rounding)
      expect(Math.abs(report.memory.peak_bytes - trial.peak_bytes)).toBeLessThan(16);
      expect(report.memory.peak_bytes).not.toBe(trial.predicted_before_bytes);
      expect(report.notes.join("\n")).toContain(`re-anchored on a trial (${trial.source})`);
      // the other micro-batches follow the model plus that point: one more sample costs what the model says
      expect(report.max_micro_batch).toBeGreaterThan(64);
    },
    scaled(120_000),
  );

  it(
    "a trial that fails leaves the plan alone and says why",
    async () => {
      const r = await cli([
        "plan",
        join(root, "examples/nbeats/model.yaml"),
        "--gpu-memory",
        "4",
        "--measure",
        "--store",
        store,
        "--",
        PYTHON,
        "-c",
        "import sys; sys.exit(3)",
      ]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/the measuring run \S+ did not end ok \(crashed: .*\); the plan is not re-anchored/);
      expect(r.stdout).toBe("");
    },
    scaled(60_000),
  );

  it.skipIf(existsSync("/dev/nvidiactl"))("on a machine without a GPU, measuring for a named GPU is refused: it would measure RAM", async () => {
    const r = await cli(["plan", join(root, "examples/nbeats/model.yaml"), "--gpu", "t4", "--measure", "--", PYTHON, "-c", "pass"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("this machine has no GPU: --measure would measure the job's RAM, not NVIDIA T4's memory");
  });

  it("a command without --measure, or --measure without a command, is a usage error", async () => {
    const stray = await cli(["plan", join(root, "examples/nbeats/model.yaml"), "--gpu", "t4", "--", "python", "x.py"]);
    expect(stray.code).toBe(2);
    expect(stray.stderr).toContain("a command after -- goes with --measure");
    const bare = await cli(["plan", join(root, "examples/nbeats/model.yaml"), "--gpu", "t4", "--measure"]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain("--measure needs the job's command after --");
  });
});
