import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import type { PlanReport } from "../../src/plan/planner.ts";

const root = new URL("../../", import.meta.url).pathname;
const run = promisify(execFile);

async function brim(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await main(argv, { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t) });
  return { code, stdout, stderr };
}

function tempFile(name: string, text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "brim-plan-")), name);
  writeFileSync(path, text);
  return path;
}

const BUNDLED = [
  "examples/nbeats/model.yaml",
  "examples/lstm-transformer/lstm.yaml",
  "examples/lstm-transformer/transformer.yaml",
  "examples/embedder/model.yaml",
  "examples/cnn-lstm/model.yaml",
  "examples/ppo/model.yaml",
];

describe("brim plan", () => {
  it("lists the catalog as JSON with --list-gpus --json", async () => {
    const { code, stdout } = await brim("plan", "--list-gpus", "--json");
    expect(code).toBe(0);
    const catalog = JSON.parse(stdout) as { id: string; memoryGiB: number }[];
    expect(catalog.find((gpu) => gpu.id === "h100-sxm")?.memoryGiB).toBe(80);
  });

  it.each(BUNDLED)("plans %s with the fields the JSON promises", async (file) => {
    const { code, stdout, stderr } = await brim("plan", join(root, file), "--gpu", "rtx-3060", "--json");
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as PlanReport;
    expect(report.params.total).toBeGreaterThan(0);
    expect(report.params.trainable).toBeLessThanOrEqual(report.params.total);
    expect(Object.keys(report.memory.components)).toEqual([
      "weights",
      "gradients",
      "optimizer_state",
      "activations",
      "input_batch",
      "temporaries",
      "workspace",
      "cuda_context",
      "allocator_slack",
    ]);
    expect(report.memory.peak_bytes).toBe(Object.values(report.memory.components).reduce((a, b) => a + b, 0));
    expect(report.max_micro_batch).toBeGreaterThan(0);
    // dominated rows and runners-up slower than the user's config are left out (test/plan/answer.test.ts)
    expect(report.suggestions.length).toBeGreaterThanOrEqual(1);
    for (const s of report.suggestions) {
      expect(Object.keys(s).sort()).toEqual([
        "accumulation",
        "checkpointing",
        "is_yours",
        "micro_batch",
        "peak_bytes",
        "precision",
        "relative_speed",
        "samples_per_s",
        "speedup_vs_yours",
      ]);
    }
    expect(Object.keys(report.your_config).sort()).toEqual([
      "accumulation",
      "budget_share",
      "checkpointing",
      "micro_batch",
      "peak_bytes",
      "precision",
      "samples_per_s",
    ]);
    expect(report.suggestions[0]?.relative_speed).toBe(1);
    expect(report.assumptions.map((a) => a.name)).toContain("cuda_context_bytes");
  });

  it("makes one plan per curriculum stage, larger for the longer stage", async () => {
    const { stdout } = await brim("plan", join(root, "examples/embedder/model.yaml"), "--gpu", "t4", "--precision", "fp16-mixed", "--json");
    const report = JSON.parse(stdout) as PlanReport;
    expect(report.stages.map((s) => [s.name, s.seq_len])).toEqual([
      ["short", 32],
      ["long", 64],
    ]);
    const [short, long] = report.stages;
    expect(long?.memory.components.activations).toBeGreaterThan(2.5 * (short?.memory.components.activations ?? 0));
    expect(report.setup.effective_batch).toBe(64);
    expect(report.params.frozen).toBeGreaterThan(0);
  });

  it("prints a readable table and Markdown", async () => {
    const text = await brim("plan", join(root, "examples/nbeats/model.yaml"), "--gpu", "rtx-4080", "--cap", "12GiB");
    expect(text.stdout).toMatch(/predicted peak/);
    // N-BEATS at its spec's batch of 32 uses a few % of the card
    expect(text.stdout).toMatch(/memory is not the limit: the effective batch \(32\) fits in one micro-batch \(memory alone would allow up to [\d,]+\)/);
    expect(text.stdout).toMatch(/cap 12\.0 GiB/);
    const md = await brim("plan", join(root, "examples/nbeats/model.yaml"), "--gpu", "rtx-4080", "--markdown");
    expect(md.stdout).toMatch(/^# Memory plan: nbeats on NVIDIA GeForce RTX 4080/);
    expect(md.stdout).toMatch(/\| \*\*predicted peak\*\*/);
  });

  it("finds a plan that fits when the naive one does not", async () => {
    const spec = tempFile(
      "big.yaml",
      "family: transformer-encoder\nvocab: 32000\nmax_positions: 2048\nd_model: 1024\nheads: 16\nffn: 4096\nlayers: 24\nseq_len: 2048\ntraining: {batch: 16}\n",
    );
    const { stdout } = await brim("plan", spec, "--gpu", "rtx-4090", "--json");
    const report = JSON.parse(stdout) as PlanReport;
    expect(report.memory.fits).toBe(false);
    expect(report.notes.join(" ")).toMatch(/does not fit/);
    expect(report.suggestions.length).toBeGreaterThan(0);
    expect(report.suggestions.every((s) => s.peak_bytes <= report.gpu.budget_bytes)).toBe(true);
  });

  it("plans a model profile written by the SDK", async () => {
    const profile = {
      schema: "brim.model-profile",
      version: 1,
      name: "tiny",
      params: { total: 1000, trainable: 1000 },
      per_sample: { input_bytes: 64, saved_bytes: { fp32: 4096, "bf16-mixed": 2500 }, forward_flops: 2000 },
    };
    const { code, stdout } = await brim(
      "plan",
      tempFile("profile.json", JSON.stringify(profile)),
      "--gpu-memory",
      "8",
      "--batch",
      "100",
      "--precision",
      "bf16-mixed",
      "--json",
    );
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as PlanReport;
    expect(report.model.source).toBe("profile");
    expect(report.memory.components.activations).toBe(100 * 2500 + 2 * 1000);
  });

  it.each([
    [["plan", "MODEL", "--gpu", "rtx-9999"], /^brim: --gpu: unknown GPU "rtx-9999"; did you mean/],
    [["plan", "MODEL", "--gpu", "rtx-3060", "--cap", "30GiB"], /^brim: --cap: cap 30\.0 GiB is above the card's 12\.0 GiB/],
    [["plan", "MODEL", "--gpu", "rtx-3060", "--batch", "-3"], /^brim: --batch must be a positive integer, got "-3"/],
    [["plan", "MODEL", "--gpu", "rtx-3060", "--precision", "fp8"], /^brim: --precision must be one of fp32, tf32/],
    [["plan", "MODEL", "--gpu", "t4", "--precision", "bf16-mixed"], /^brim: --precision: NVIDIA T4 \(turing\) has no fast bf16-mixed; use fp16-mixed/],
    [["plan", "MODEL"], /^brim: --gpu: name the GPU to plan for/],
    [["plan", "MODEL", "--gpu", "rtx-3060", "--margin", "1.5"], /^brim: --margin must be a fraction/],
    [["plan", "MODEL", "--gpu", "rtx-3060", "--sharding", "zero3"], /^brim: --sharding: zero3 shards states over several GPUs; add --gpus N/],
    [["plan", "MODEL", "--gpu", "rtx-3060", "--bogus"], /^brim: unknown option '--bogus'/],
    [["plan", "/nonexistent/model.yaml", "--gpu", "rtx-3060"], /^brim: cannot read model file \/nonexistent\/model.yaml: no such file/],
  ])("bad input %j exits 2 with one line", async (argv, message) => {
    const args = argv.map((a) => (a === "MODEL" ? join(root, "examples/nbeats/model.yaml") : a));
    const { code, stderr, stdout } = await brim(...args);
    expect(stdout).toBe("");
    expect(stderr).toMatch(message);
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(code).toBe(2);
  });

  it.each([
    ["unknown family", "family: resnet\n", /^brim: .*bad\.yaml: family: unknown family "resnet"; known: mlp, nbeats/],
    ["negative size", "family: mlp\ninput: 4\nhidden: [8, -2]\noutput: 1\n", /^brim: .*bad\.yaml: hidden\[1\]: Too small/],
    ["malformed YAML", "family: mlp\n  input: [4\n", /^brim: .*bad\.yaml: not valid YAML/],
    ["a typo in a field", "family: mlp\ninput: 4\nhiden: [8]\nhidden: [8]\noutput: 1\n", /^brim: .*bad\.yaml: unknown field hiden/],
    [
      "heads that do not divide d_model",
      "family: transformer-encoder\nvocab: 10\nmax_positions: 8\nd_model: 10\nheads: 3\nffn: 8\nlayers: 1\n",
      /heads: d_model 10 is not divisible by heads 3/,
    ],
    [
      "stage with a sequence on an MLP",
      "family: mlp\ninput: 4\nhidden: [8]\noutput: 1\nstages: [{name: a, seq_len: 10}]\n",
      /stages\.a\.seq_len: family mlp has no sequence length/,
    ],
  ])("bad spec: %s", async (_name, text, message) => {
    const { code, stderr } = await brim("plan", tempFile("bad.yaml", text), "--gpu", "rtx-3060");
    expect(stderr).toMatch(message);
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(code).toBe(2);
  });

  it("malformed JSON exits 2 naming the file", async () => {
    const { code, stderr } = await brim("plan", tempFile("config.json", '{"model_type": '), "--gpu", "rtx-3060");
    expect(stderr).toMatch(/^brim: .*config\.json: not valid JSON/);
    expect(code).toBe(2);
  });

  it("--help teaches the options with examples", async () => {
    const { code, stdout } = await brim("plan", "--help");
    expect(code).toBe(0);
    for (const flag of [
      "--gpu",
      "--gpu-memory",
      "--precision",
      "--optimizer",
      "--batch",
      "--effective-batch",
      "--seq-len",
      "--checkpointing",
      "--gpus",
      "--sharding",
      "--cap",
      "--margin",
      "--json",
      "--markdown",
    ]) {
      expect(stdout).toContain(flag);
    }
    expect(stdout).toMatch(/Examples:\n\s+\$ brim plan -- python train\.py --config config\.yaml /);
  });

  it("the built CLI runs as a real process: plan, bad input, exit codes", async () => {
    const bin = join(root, "bin/brim.js");
    const ok = await run(process.execPath, [bin, "plan", join(root, "examples/ppo/model.yaml"), "--gpu", "l4", "--json"]);
    expect((JSON.parse(ok.stdout) as PlanReport).model.family).toBe("actor-critic");
    const bad = await run(process.execPath, [bin, "plan", join(root, "examples/ppo/model.yaml"), "--gpu", "nope"]).catch(
      (e: unknown) => e as { code: number; stderr: string },
    );
    expect(bad).toMatchObject({ code: 2 });
    expect((bad as { stderr: string }).stderr).toMatch(/^brim: --gpu: unknown GPU "nope"/);
  });
});
