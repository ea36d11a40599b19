// bench/gpu/fit-constants.mjs on synthetic plan/measurement pairs made from known constants: it must
// recover them, report the plan's error before and after, and leave out pairs it cannot trust.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = new URL("../../", import.meta.url).pathname;
const tmp = mkdtempSync(join(tmpdir(), "brim-fit-test-"));
const MiB = 2 ** 20;
const OLD = { cuda_context_bytes: 512 * MiB, cublas_workspace_bytes: 32 * MiB, cudnn_workspace_bytes: 128 * MiB, allocator_slack_fraction: 0.1 };

interface Truth {
  context: number;
  cudnn: number;
  slack: number;
}

interface FakeModel {
  job: string;
  cudnn: 0 | 1;
  weights: number;
  perSample: number;
}

const MODELS: FakeModel[] = [
  { job: "mlp", cudnn: 0, weights: 48e6, perSample: 80e3 },
  { job: "lstm", cudnn: 1, weights: 6e6, perSample: 2e6 },
  { job: "cnn", cudnn: 1, weights: 2e6, perSample: 1.3e6 },
  { job: "encoder", cudnn: 0, weights: 24e6, perSample: 11e6 },
];

/** One pair as the campaign records it: the plan under the old constants, the peak under `truth`. */
function pair(model: FakeModel, mb: number, truth: Truth, noise: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const activations = model.perSample * mb;
  const input = 1000 * mb;
  const temporaries = 0.2 * activations;
  const dynamic = activations + input + temporaries;
  const components = {
    weights: model.weights,
    gradients: model.weights,
    optimizer_state: 2 * model.weights,
    activations,
    input_batch: input,
    temporaries,
    workspace: OLD.cublas_workspace_bytes + model.cudnn * OLD.cudnn_workspace_bytes,
    cuda_context: OLD.cuda_context_bytes,
    allocator_slack: OLD.allocator_slack_fraction * dynamic,
  };
  const planned = Object.values(components).reduce((a, b) => a + b, 0);
  const real = 4 * model.weights + dynamic * (1 + truth.slack) + truth.context + OLD.cublas_workspace_bytes + model.cudnn * truth.cudnn;
  return {
    schema: "brim.gpu-campaign/v1",
    part: "plan-accuracy",
    key: `${model.job}|fp32|${mb}`,
    ok: true,
    quick: false,
    job: model.job,
    precision: "fp32",
    precision_in_force: "fp32",
    micro_batch: mb,
    machine: { gpus: [{ name: "Fake GPU 80GB" }] },
    measured: { peak_tree_gpu_bytes: Math.round(real * (1 + noise)), framework_peak_reserved_bytes: Math.round(real * (1 + noise) - truth.context), oom_recoveries: 0 },
    predicted: { spec: { peak_bytes: planned, components, gpu: { id: "fake-80gb" }, assumptions: Object.entries(OLD).map(([name, value]) => ({ name, value, calibrated: false })) } },
    ...extra,
  };
}

interface Stats {
  n: number;
  median_abs: number;
  worst_abs: number;
}

interface FitResult {
  pairs: number;
  skipped: Record<string, number>;
  fit: {
    constants: { cuda_context_bytes: number; cublas_workspace_bytes: number; cudnn_workspace_bytes: number; allocator_slack_fraction: number };
    determined: { cudnn_workspace_bytes: boolean; allocator_slack_fraction: boolean };
  };
  evaluation: { before: Stats | null; after: Stats; held_out_job: Stats; meets_targets: boolean };
  calibration: { matches: string[]; constants: Record<string, number> };
  direct: { context_outside_allocator_median_bytes: number };
}

function fit(lines: Record<string, unknown>[], ...args: string[]): FitResult {
  const file = join(tmp, `pairs-${Math.random().toString(16).slice(2)}.jsonl`);
  writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  const res = spawnSync(process.execPath, [join(root, "bench/gpu/fit-constants.mjs"), file, "--json", ...args], { encoding: "utf8" });
  expect(res.stderr).toBe("");
  expect(res.status).toBe(0);
  return JSON.parse(res.stdout) as FitResult;
}

// A small deterministic noise, ±0.2 %.
const noise = (i: number): number => (((i * 7919) % 13) / 12 - 0.5) * 0.004;

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("fit-constants on synthetic pairs", () => {
  const truth: Truth = { context: 420 * MiB, cudnn: 72 * MiB, slack: 0.06 };
  const lines = MODELS.flatMap((m, j) => [16, 128, 512, 2048].map((mb, i) => pair(m, mb, truth, noise(4 * j + i))));

  it("recovers known context, cuDNN workspace and slack, and the plan's error falls below the targets", () => {
    const result = fit(lines);
    expect(result.pairs).toBe(16);
    const k = result.fit.constants;
    expect(Math.abs(k.cuda_context_bytes - truth.context)).toBeLessThan(6 * MiB);
    expect(Math.abs(k.cudnn_workspace_bytes - truth.cudnn)).toBeLessThan(6 * MiB);
    expect(k.allocator_slack_fraction).toBeCloseTo(truth.slack, 2);
    expect(result.fit.determined).toEqual({ cudnn_workspace_bytes: true, allocator_slack_fraction: true });
    const e = result.evaluation;
    expect(e.before?.median_abs).toBeGreaterThan(0.05);
    expect(e.after.median_abs).toBeLessThan(0.005);
    expect(e.after.worst_abs).toBeLessThan(0.01);
    expect(e.held_out_job.worst_abs).toBeLessThan(0.02);
    expect(e.meets_targets).toBe(true);
    expect(result.calibration).toMatchObject({ matches: ["fake-80gb"], constants: { cuda_context_bytes: k.cuda_context_bytes } });
    expect(result.direct.context_outside_allocator_median_bytes).toBeCloseTo(truth.context, -6);
  });

  it("fits the allocator's own view (max reserved) without a context", () => {
    const result = fit(lines, "--target", "reserved");
    expect(result.fit.constants.cuda_context_bytes).toBe(0);
    expect(Math.abs(result.fit.constants.cublas_workspace_bytes - OLD.cublas_workspace_bytes)).toBeLessThan(8 * MiB);
    expect(result.fit.constants.allocator_slack_fraction).toBeCloseTo(truth.slack, 2);
    expect(result.evaluation.before).toBeNull();
  });

  it("keeps the cuDNN workspace when no pair can tell it apart, and says so", () => {
    const mlpOnly = lines.filter((l) => l.job === "mlp" || l.job === "encoder");
    const result = fit(mlpOnly);
    expect(result.fit.determined.cudnn_workspace_bytes).toBe(false);
    expect(result.fit.constants.cudnn_workspace_bytes).toBe(OLD.cudnn_workspace_bytes);
    expect(Math.abs(result.fit.constants.cuda_context_bytes - truth.context)).toBeLessThan(6 * MiB);
  });

  it("leaves out failed, smoke, fallen-back and split runs, and keeps the latest record of a key", () => {
    const bad = [
      pair(MODELS[0]!, 4, truth, 0, { key: "mlp|fp32|4", ok: false }),
      pair(MODELS[0]!, 8, truth, 0, { key: "mlp|fp32|8", quick: true }),
      pair(MODELS[0]!, 8, truth, 0, { key: "mlp|fp16-mixed|8", precision: "fp16-mixed", precision_in_force: "fp32" }),
      pair(MODELS[0]!, 8, truth, 0, { key: "mlp|bf16-mixed|8", measured: { peak_tree_gpu_bytes: 1e9, oom_recoveries: 1 } }),
      pair(MODELS[0]!, 8, truth, 0, { key: "mlp|bf16-mixed|16", measured: { peak_tree_gpu_bytes: null } }),
    ];
    // an earlier, wrong record of a key that a later one replaces
    const stale = pair(MODELS[1]!, 16, { context: 9e9, cudnn: 0, slack: 0 }, 0);
    const result = fit([stale, ...lines, ...bad]);
    expect(result.pairs).toBe(16);
    expect(result.skipped).toEqual({
      "failed run": 1,
      "quick (CPU smoke) record": 1,
      "precision fell back": 1,
      "out-of-memory recovery split the micro-batch": 1,
      "no measured tree peak": 1,
    });
    expect(result.evaluation.after.worst_abs).toBeLessThan(0.01);
  });

  it("prints a readable before/after table", () => {
    const file = join(tmp, "table.jsonl");
    writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
    const res = spawnSync(process.execPath, [join(root, "bench/gpu/fit-constants.mjs"), file], { encoding: "utf8" });
    expect(res.status).toBe(0);
    expect(res.stdout).toMatch(/cuda_context_bytes +512 MiB -> 4(19|20|21) MiB/);
    expect(res.stdout).toMatch(/^before +\d+\.\d %/m);
    expect(res.stdout).toMatch(/^after +0\.\d %/m);
    expect(res.stdout).toContain("targets (median ≤ 5.0 %, worst ≤ 10.0 %): met");
  });
});
