import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import { graphFromSpec } from "../../src/plan/families.ts";
import { footprintFromGraph } from "../../src/plan/footprint.ts";
import type { PlanReport } from "../../src/plan/planner.ts";
import { parseModelSpec } from "../../src/plan/spec.ts";

const PYTHON = process.env["BRIM_TEST_PYTHON"] ?? "/usr/bin/python3";
const root = new URL("../../", import.meta.url).pathname;

// Real PyTorch (CPU) measures, with the SDK's saved-tensor hooks, what the planner predicts op by op.
const specs = [
  { family: "mlp", input: 4, hidden: [8], output: 2 },
  { family: "mlp", input: 64, hidden: [256, 256], output: 10 },
  { family: "mlp", input: 32, hidden: [128, 64], output: 3, activation: "gelu" },
  { family: "mlp", input: 32, hidden: [96, 48], output: 5, activation: "tanh", norm: "layernorm", dropout: 0.2 },
] as const;

describe("planner activations against the SDK's measurement in real PyTorch", () => {
  const dir = mkdtempSync(join(tmpdir(), "brim-profile-"));
  execFileSync(PYTHON, [join(root, "test/torch/profile_specs.py"), dir], { input: JSON.stringify(specs), encoding: "utf8" });

  it.each(specs.map((spec, i) => [JSON.stringify(spec), spec, i] as const))("fp32 bytes kept per sample: %s", (_name, spec, i) => {
    const profile = JSON.parse(readFileSync(join(dir, `profile-${i}.json`), "utf8")) as {
      per_sample: { saved_bytes: { fp32: number } };
      params: { total: number };
    };
    const predicted = footprintFromGraph(graphFromSpec(parseModelSpec(spec)));
    expect(predicted.params.total).toBe(profile.params.total);
    // CPU dropout keeps a float mask (4 bytes); the CUDA kernel the planner models keeps a bool mask (1 byte)
    const cpuDropoutMask = "dropout" in spec ? 3 * spec.hidden.reduce((a: number, b: number) => a + b, 0) : 0;
    expect(predicted.activations.fp32.perSample + cpuDropoutMask).toBeCloseTo(profile.per_sample.saved_bytes.fp32, 0);
  });

  it("brim plan reads the profile the SDK wrote", async () => {
    let stdout = "";
    const code = await main(["plan", join(dir, "profile-1.json"), "--gpu", "rtx-4090", "--batch", "64", "--json"], {
      stdout: (t) => void (stdout += t),
      stderr: () => {},
    });
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as PlanReport;
    expect(report.model.source).toBe("profile");
    expect(report.params.total).toBe(64 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
    expect(report.memory.components.activations).toBe(64 * 2088);
  });
});
