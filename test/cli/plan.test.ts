import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import type { PlanReport } from "../../src/plan/planner.ts";

const root = new URL("../../", import.meta.url).pathname;

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
      "communication",
      "activations",
      "input_batch",
      "temporaries",
      "workspace",
      "cuda_context",
      "allocator_slack",
    ]);
    expect(report.memory.peak_bytes).toBe(Object.values(report.memory.components).reduce((a, b) => a + b, 0));
    // one GPU: no communication buffers, nothing offloaded
    expect([report.memory.components.communication, report.memory.host_bytes_per_node]).toEqual([0, 0]);
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
    [["plan", "MODEL", "--gpu", "h100-sxm", "--gpus", "8", "--offload", "params"], /^brim: --offload: ddp keeps every state on the GPU; CPU offload needs/],
    [
      ["plan", "MODEL", "--gpu", "h100-sxm", "--gpus", "8", "--sharding", "zero2", "--offload", "params"],
      /^brim: --offload: zero2 keeps the 16-bit parameters/,
    ],
    [["plan", "MODEL", "--gpu", "h100-sxm", "--gpus", "8", "--sharding", "fsdp", "--offload", "optimizer"], /^brim: --offload: FSDP offloads parameters/],
    [["plan", "MODEL", "--gpu", "h100-sxm", "--offload", "disk"], /^brim: --offload must be one of none, optimizer, params; got "disk"/],
    [["plan", "MODEL", "--gpu", "h100-sxm", "--gpus", "8", "--sharding", "ddp,zero4"], /^brim: --sharding must be one of .*; got "zero4"/],
    [["plan", "MODEL", "--gpu", "h100-sxm", "--nodes", "0"], /^brim: --nodes must be a positive integer, got "0"/],
    [["plan", "MODEL", "--gpu", "t4,p100", "--gpus", "8", "--sharding", "all"], /^brim: compare strategies on one GPU, or GPUs under one strategy/],
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
      "--nodes",
      "--sharding",
      "--offload",
      "--cap",
      "--margin",
      "--json",
      "--markdown",
    ]) {
      expect(stdout).toContain(flag);
    }
    expect(stdout).toMatch(/Examples:\n\s+\$ brim plan -- python train\.py --config config\.yaml /);
    for (const example of [
      "--sharding ddp,zero2,zero3,fsdp",
      "--nodes 4 --sharding hybrid",
      "--sharding zero3 --offload params",
      "--sharding zero2 --offload optimizer",
    ])
      expect(stdout).toContain(example);
  });

  it("--sharding ddp,zero2,zero3,fsdp: one table, a row per strategy with its peak, largest micro-batch, host RAM and verdict; --json an array", async () => {
    const args = ["plan", join(root, "test/fixtures/hf/llama-2-7b.json"), "--gpu", "h100-sxm", "--gpus", "8", "--precision", "bf16-mixed", "--seq-len", "2048"];
    const text = await brim(...args, "--sharding", "ddp,zero2,zero3,fsdp");
    expect(text.code, text.stderr).toBe(0);
    const lines = text.stdout.split("\n");
    expect(lines[0]).toBe("brim plan · llama (hf-llama, from hf-config) on 8 × H100 SXM: bf16-mixed, adamw, budget 71.7 GiB per GPU");
    expect(lines[2]).toMatch(/^strategy\s+per-GPU peak\s+micro-batch\s+largest that fits\s+host RAM \/ node\s+verdict$/);
    expect(lines[3]).toMatch(/^ddp\s+.*does not fit: not even one sample/);
    expect(lines.slice(4, 7).map((l) => l.split(/\s+/)[0])).toEqual(["zero2", "zero3", "fsdp"]);
    for (const line of lines.slice(4, 7)) expect(line).toMatch(/fits: micro-batch up to \d+$/);
    const json = await brim(...args, "--sharding", "all", "--offload", "params", "--json");
    expect(json.code, json.stderr).toBe(0);
    const rows = JSON.parse(json.stdout) as { sharding: string; host_bytes_per_node: number | null; fits: boolean; verdict: string; plan: PlanReport | null }[];
    expect(rows.map((r) => r.sharding)).toEqual(["ddp", "zero1", "zero2", "zero3", "fsdp", "shard-grad-op"]);
    expect(rows.filter((r) => r.plan === null).map((r) => r.sharding)).toEqual(["ddp", "zero1", "zero2"]);
    for (const r of rows.slice(3)) expect(r.host_bytes_per_node).toBeGreaterThan(100 * 2 ** 30);
  });

  it("a single strategy across nodes with offload: the setup says so, the host RAM per node is a line of its own", async () => {
    const { code, stdout } = await brim(
      "plan",
      join(root, "test/fixtures/hf/llama-2-7b.json"),
      "--gpu",
      "h100-sxm",
      "--gpus",
      "8",
      "--nodes",
      "2",
      "--sharding",
      "zero3",
      "--offload",
      "params",
      "--precision",
      "bf16-mixed",
    );
    expect(code).toBe(0);
    expect(stdout).toMatch(/budget 71\.7 GiB per GPU × 16 \(2 nodes\)/);
    expect(stdout).toMatch(/× 16 GPUs on 2 nodes \(zero3, offload params\)/);
    expect(stdout).toMatch(/\n {2}communication buffers +1\.02 GiB /);
    expect(stdout).toMatch(/\nhost RAM {3}84\.7 GiB per node for the offloaded states of its 8 ranks \(offload params\)\n/);
  });
});
