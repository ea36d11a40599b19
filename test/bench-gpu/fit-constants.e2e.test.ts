// bench/gpu/fit-constants.mjs on synthetic pairs: records of the example jobs whose "measured"
// peaks are the planner's own memory model under known constants. The fit must recover them, say
// the plan's error before and after, and leave out the pairs it cannot trust.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseModelFile } from "../../src/plan/model-file.ts";
import { pairsFromRecords, predict, type AccuracyRecord, type FittedConstants } from "../../src/plan/validation.ts";

const root = new URL("../../", import.meta.url).pathname;
const tmp = mkdtempSync(join(tmpdir(), "brim-fit-test-"));
const MiB = 2 ** 20;
const load = (path: string) => parseModelFile(readFileSync(join(root, path), "utf8"), path);

const TRUTH: FittedConstants = {
  cuda_context_bytes: 700 * MiB,
  cublas_workspace_bytes: 90 * MiB,
  cudnn_workspace_bytes: 40 * MiB,
  allocator_slack_fraction: 0.15,
  conv_workspace_factor: 3,
  rnn_workspace_factor: 1.4,
};
const JOBS: [string, string, number[]][] = [
  ["nbeats", "examples/nbeats/model.yaml", [512, 4096, 16384]],
  ["ppo", "examples/ppo/model.yaml", [256, 4096, 16384]],
  ["embedder", "examples/embedder/model.yaml", [8, 64, 256]],
  ["lstm", "examples/lstm-transformer/lstm.yaml", [32, 256, 1024]],
  ["cnn-lstm", "examples/cnn-lstm/model.yaml", [32, 256, 1024]],
];

function record(job: string, spec: string, precision: string, mb: number, extra: Record<string, unknown> = {}): AccuracyRecord & Record<string, unknown> {
  return {
    schema: "brim.gpu-campaign/v1",
    part: "plan-accuracy",
    key: `${job}|${precision}|${mb}`,
    ok: true,
    quick: false,
    job,
    model_spec: spec,
    precision,
    precision_in_force: precision,
    micro_batch: mb,
    optimizer: "adam",
    machine: { gpus: [{ name: "Fake GPU 80GB" }] },
    ...extra,
  };
}

/** Records whose measured peak is the model's under TRUTH (±0.2 % deterministic noise). */
function truthful(): (AccuracyRecord & Record<string, unknown>)[] {
  const out: (AccuracyRecord & Record<string, unknown>)[] = [];
  let i = 0;
  for (const [job, spec, batches] of JOBS) {
    for (const precision of ["fp32", "bf16-mixed"]) {
      for (const mb of batches) {
        const r = record(job, spec, precision, mb, { measured: { peak_tree_gpu_bytes: 1 } });
        const [pair] = pairsFromRecords([r], "spec", load).pairs;
        const peak = Math.round(predict(pair!, TRUTH) * (1 + (((i++ * 7919) % 13) / 12 - 0.5) * 0.004));
        const outside = TRUTH.cuda_context_bytes + (job.includes("lstm") ? 16 * MiB : 0);
        out.push({ ...r, measured: { peak_tree_gpu_bytes: peak, framework_peak_reserved_bytes: peak - outside, oom_recoveries: 0 } });
      }
    }
  }
  return out;
}

interface Acc {
  pairs: number;
  median_abs_error: number;
  worst_abs_error: number;
  under_3pct_share: number;
}
interface FitResult {
  pairs: number;
  skipped: Record<string, number>;
  fit: { constants: FittedConstants } | null;
  evaluation: { before: Acc; in_sample: Acc; leave_one_job_out: Acc; meets_targets: boolean };
  command: string;
  inputs: string[];
}

function fit(lines: Record<string, unknown>[], ...args: string[]): FitResult {
  const file = join(tmp, `pairs-${Math.random().toString(16).slice(2)}.jsonl`);
  writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  const res = spawnSync(process.execPath, [join(root, "bench/gpu/fit-constants.mjs"), file, "--json", ...args], { encoding: "utf8" });
  expect(res.stderr).toBe("");
  expect(res.status).toBe(0);
  return JSON.parse(res.stdout) as FitResult;
}

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("fit-constants on synthetic pairs", () => {
  const lines = truthful();

  it("recovers known constants, and the plan's error falls below the targets, leave-one-job-out too", () => {
    const result = fit(lines);
    expect(result.pairs).toBe(30);
    const k = result.fit!.constants;
    expect(k.cuda_context_bytes).toBe(TRUTH.cuda_context_bytes);
    expect(Math.abs(k.cublas_workspace_bytes - TRUTH.cublas_workspace_bytes)).toBeLessThan(8 * MiB);
    expect(k.allocator_slack_fraction).toBeCloseTo(TRUTH.allocator_slack_fraction, 1);
    expect(k.rnn_workspace_factor).toBeCloseTo(TRUTH.rnn_workspace_factor, 0);
    expect(k.conv_workspace_factor).toBeCloseTo(TRUTH.conv_workspace_factor, 0);
    const e = result.evaluation;
    expect(e.before.median_abs_error).toBeGreaterThan(0.05);
    expect(e.in_sample.median_abs_error).toBeLessThan(0.01);
    expect(e.in_sample.worst_abs_error).toBeLessThan(0.02);
    expect(e.leave_one_job_out.pairs).toBe(30);
    expect(result.command).toContain("bench/gpu/fit-constants.mjs");
  });

  it("keeps a workspace factor at its default when no job tells it apart (held-out LSTM: only the CNN-LSTM has an RNN)", () => {
    const result = fit(lines.filter((l) => l.job !== "lstm"));
    expect(result.fit!.constants.rnn_workspace_factor).toBe(1);
    expect(result.fit!.constants.conv_workspace_factor).toBe(1);
  });

  it("leaves out failed, smoke, fallen-back and split runs, and keeps the latest record of a key", () => {
    const spec = "examples/nbeats/model.yaml";
    const bad = [
      record("nbeats", spec, "fp32", 4, { ok: false, measured: { peak_tree_gpu_bytes: 1e9 } }),
      record("nbeats", spec, "fp32", 8, { quick: true, measured: { peak_tree_gpu_bytes: 1e9 } }),
      record("nbeats", spec, "fp16-mixed", 8, { precision_in_force: "fp32", measured: { peak_tree_gpu_bytes: 1e9 } }),
      record("nbeats", spec, "bf16-mixed", 8, { measured: { peak_tree_gpu_bytes: 1e9, oom_recoveries: 1 } }),
      record("nbeats", spec, "bf16-mixed", 16, { measured: { peak_tree_gpu_bytes: null } }),
    ];
    const stale = { ...lines[0]!, measured: { peak_tree_gpu_bytes: 9e10 } };
    const result = fit([stale, ...lines, ...bad]);
    expect(result.pairs).toBe(30);
    expect(result.skipped).toEqual({
      "failed run": 1,
      "quick (CPU smoke) record": 1,
      "precision fell back": 1,
      "out-of-memory recovery split the micro-batch": 1,
      "no measured tree peak": 1,
    });
    expect(result.evaluation.in_sample.worst_abs_error).toBeLessThan(0.02);
  });

  it("prints a readable before/after table", () => {
    const file = join(tmp, "table.jsonl");
    writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
    const res = spawnSync(process.execPath, [join(root, "bench/gpu/fit-constants.mjs"), file], { encoding: "utf8" });
    expect(res.status).toBe(0);
    expect(res.stdout).toMatch(/cuda_context_bytes +512 MiB -> 700 MiB/);
    expect(res.stdout).toMatch(/^before \(defaults\) +\d+\.\d %/m);
    expect(res.stdout).toMatch(/^after, in-sample +0\.\d %/m);
  });

  it("rejects an unknown option with a one-line cause", () => {
    const res = spawnSync(process.execPath, [join(root, "bench/gpu/fit-constants.mjs"), "--target", "reserved"], { encoding: "utf8" });
    expect(res.status).toBe(2);
    expect(res.stderr).toBe("fit-constants: unknown option --target\n");
  });
});
