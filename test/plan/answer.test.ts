// The plan answers the user's question: their config's predicted peak and speed, each suggestion's
// speed-up over it, memory left unused said plainly, no dominated rows, "memory is not the limit"
// instead of an absurd largest micro-batch, GPU names as people write them, several GPUs side by side.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import { renderPlanText } from "../../src/cli/render-plan.ts";
import { parseModelFile } from "../../src/plan/model-file.ts";
import { plan, type PlanReport } from "../../src/plan/planner.ts";

const root = new URL("../../", import.meta.url).pathname;
const load = (path: string) => parseModelFile(readFileSync(join(root, path), "utf8"), path);

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await main(args, { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t) });
  return { code, stdout, stderr };
}

describe("your config, and what beats it", () => {
  const report = plan(load("examples/embedder/model.yaml"), { gpu: "rtx-4090" });

  it("predicts the user's config (4 × 16, fp32) and each suggestion's speed-up over it", () => {
    expect(report.your_config).toMatchObject({ micro_batch: 4, accumulation: 16, precision: "fp32", checkpointing: false });
    expect(report.your_config.peak_bytes).toBe(report.memory.peak_bytes);
    expect(report.your_config.samples_per_s).toBeGreaterThan(0);
    for (const s of report.suggestions) expect(s.speedup_vs_yours).toBeCloseTo(s.samples_per_s / report.your_config.samples_per_s, 2);
    expect(report.suggestions[0]!.speedup_vs_yours).toBeGreaterThan(1);
  });

  it("says plainly that memory is underused, and what keeps the effective batch", () => {
    expect(report.your_config.budget_share).toBeLessThan(0.05);
    expect(report.notes).toContain("4 × 16 uses 3 % of 21.6 GiB: 64 × 1 keeps the effective batch at 64 with fewer, larger steps");
  });

  it("drops checkpointing that saves nothing and tf32 rows identical to fp32", () => {
    // the RTX 4090's TF32 rate equals its FP32 rate: a tf32 row would repeat the fp32 one
    expect(report.suggestions.some((s) => s.precision === "tf32")).toBe(false);
    for (const s of report.suggestions.filter((x) => x.checkpointing)) {
      expect(report.suggestions.some((o) => !o.checkpointing && o.precision === s.precision && o.micro_batch >= s.micro_batch)).toBe(false);
    }
    // on an A100 TF32 is 8× FP32: the tf32 row is a real choice and stays
    const a100 = plan(load("examples/embedder/model.yaml"), { gpu: "a100-80gb", precision: "fp32" });
    expect(a100.suggestions.some((s) => s.precision === "tf32") || a100.suggestions.every((s) => s.precision.endsWith("-mixed"))).toBe(true);
  });

  it("renders a 'yours' row first and a 'vs yours' column", () => {
    const text = renderPlanText(report);
    expect(text).toMatch(/^ {2}yours +fp32 +off +4 × 16 .* 1\.00×$/m);
    expect(text).toContain("vs yours");
  });
});

describe("when memory is not the limit", () => {
  it("a PPO minibatch of 64 transitions: says so instead of a largest micro-batch of hundreds of thousands", () => {
    const report = plan(load("examples/ppo/model.yaml"), { gpu: "rtx-4090" });
    expect(report.memory_limited).toBe(false);
    expect(report.max_micro_batch).toBeGreaterThan(100_000);
    const text = renderPlanText(report);
    expect(text).toContain("memory is not the limit: the effective batch (64) fits in one micro-batch");
    expect(text).not.toMatch(/^largest micro-batch that fits/m);
    expect(report.notes.join("\n")).toContain("memory is not what limits this job");
  });

  it("a job that fills the card still gets its largest micro-batch", () => {
    const report = plan(load("examples/lstm-transformer/lstm.yaml"), { gpu: "t4", effectiveBatch: 65536 });
    expect(report.memory_limited).toBe(true);
    expect(renderPlanText(report)).toMatch(/^largest micro-batch that fits: [\d,]+$/m);
  });
});

describe("GPU names as people write them", () => {
  it("'RTX 6000' asks which of the three cards", async () => {
    const r = await cli(["plan", join(root, "examples/ppo/model.yaml"), "--gpu", "RTX 6000"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'brim: --gpu: "RTX 6000" could be quadro-rtx-6000 (Quadro RTX 6000, 24 GB, turing), rtx-a6000 (RTX A6000, 48 GB, ampere) or rtx-6000-ada (RTX 6000 Ada Generation, 48 GB, ada): name one with --gpu\n',
    );
  });

  it("a miss points to --list-gpus and --gpu-memory", async () => {
    const r = await cli(["plan", join(root, "examples/ppo/model.yaml"), "--gpu", "voodoo 5"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("brim plan --list-gpus");
    expect(r.stderr).toContain("--gpu-memory <GiB>");
  });
});

describe("several GPUs side by side (--gpu t4,p100)", () => {
  it("plans the job on each, in one table, and as a JSON array", async () => {
    const text = await cli(["plan", join(root, "examples/embedder/model.yaml"), "--gpu", "t4,p100"]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^T4 .* fits/m);
    expect(text.stdout).toMatch(/^Tesla P100 .* fits/m);
    expect(text.stdout).toContain("your config (fp32, 4 × 16)");
    const json = await cli(["plan", join(root, "examples/embedder/model.yaml"), "--gpu", "t4,p100", "--json"]);
    const reports = JSON.parse(json.stdout) as PlanReport[];
    expect(reports.map((r) => r.gpu.id)).toEqual(["t4", "p100-16gb"]);
    const md = await cli(["plan", join(root, "examples/embedder/model.yaml"), "--gpu", "t4,p100", "--markdown"]);
    expect(md.stdout).toMatch(/^\| T4 \|/m);
  });

  it("an empty or unknown name in the list is a one-line usage error", async () => {
    const empty = await cli(["plan", join(root, "examples/embedder/model.yaml"), "--gpu", "t4,,p100"]);
    expect(empty.code).toBe(2);
    expect(empty.stderr.trim().split("\n")).toHaveLength(1);
    const unknown = await cli(["plan", join(root, "examples/embedder/model.yaml"), "--gpu", "t4,voodoo"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown GPU "voodoo"');
  });
});
