import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { graphFromSpec } from "../../src/plan/families.ts";
import { summarizeParams } from "../../src/plan/graph.ts";
import { parseModelSpec } from "../../src/plan/spec.ts";

// Debian's python3-torch is installed for /usr/bin/python3 (the first python3 on PATH may lack torch)
const PYTHON = process.env["BRIM_TEST_PYTHON"] ?? "/usr/bin/python3";
const root = new URL("../../", import.meta.url).pathname;

function bundledSpecs(): [string, unknown][] {
  const out: [string, unknown][] = [];
  for (const dir of readdirSync(join(root, "examples"), { withFileTypes: true })) {
    if (!dir.isDirectory()) continue;
    for (const file of readdirSync(join(root, "examples", dir.name))) {
      if (!file.endsWith(".yaml") || file === "config.yaml") continue;
      const value = parse(readFileSync(join(root, "examples", dir.name, file), "utf8")) as Record<string, unknown>;
      if (typeof value["family"] === "string") out.push([`examples/${dir.name}/${file}`, value]);
    }
  }
  return out;
}

const variants: [string, unknown][] = [
  ["mlp with layernorm and dropout", { family: "mlp", input: 17, hidden: [64, 33, 9], output: 3, norm: "layernorm", dropout: 0.1, activation: "gelu" }],
  [
    "nbeats generic, shared weights",
    {
      family: "nbeats",
      lookback: 30,
      horizon: 7,
      units: 64,
      layers_per_block: 3,
      share_weights_in_stack: true,
      stacks: [
        { type: "generic", blocks: 4, theta: 8 },
        { type: "trend", blocks: 2, degree: 2 },
      ],
    },
  ],
  [
    "nbeats multivariate seasonality",
    { family: "nbeats", lookback: 48, horizon: 12, features: 3, units: 32, stacks: [{ type: "seasonality", blocks: 2, harmonics: 5 }] },
  ],
  ["bidirectional 3-layer gru", { family: "gru", input: 11, hidden: 40, layers: 3, bidirectional: true, output: 5, seq_len: 20 }],
  ["lstm", { family: "lstm", input: 7, hidden: 13, layers: 2, output: 1, seq_len: 9 }],
  [
    "cnn-lstm with stride, no batchnorm",
    {
      family: "cnn1d-lstm",
      input: 3,
      seq_len: 100,
      conv: [
        { out: 8, kernel: 4, stride: 2 },
        { out: 16, kernel: 3 },
      ],
      batchnorm: false,
      pool: 1,
      lstm: { hidden: 20, layers: 2 },
      output: 4,
    },
  ],
  [
    "post-norm transformer on features",
    {
      family: "transformer-encoder",
      input: 10,
      max_positions: 64,
      d_model: 32,
      heads: 4,
      ffn: 64,
      layers: 2,
      norm_first: false,
      final_norm: false,
      pooling: "none",
      output: 2,
      seq_len: 16,
    },
  ],
  [
    "transformer with LoRA everywhere and two MoE blocks",
    {
      family: "transformer-encoder",
      vocab: 500,
      max_positions: 32,
      d_model: 48,
      heads: 6,
      ffn: 96,
      layers: 3,
      output: 0,
      lora: { rank: 4, targets: ["q", "k", "v", "o", "ffn_in", "ffn_out"] },
      moe: { layers: [0, 2], experts: 3, top_k: 1, ffn: 40 },
    },
  ],
  ["discrete actor-critic", { family: "actor-critic", observation: 12, actions: 4, continuous: false, policy: [64, 64], value: [32], activation: "relu" }],
];

describe("parameter counts match PyTorch builds of the same spec", () => {
  const cases = [...bundledSpecs(), ...variants];
  let reference: { total: number; trainable: number }[] = [];

  it("the bundled specs are all here", () => {
    expect(bundledSpecs().length).toBeGreaterThanOrEqual(6);
    const output = execFileSync(PYTHON, [join(root, "test/torch/build_model.py")], { input: JSON.stringify(cases.map(([, s]) => s)), encoding: "utf8" });
    reference = JSON.parse(output) as typeof reference;
    expect(reference).toHaveLength(cases.length);
  });

  it.each(cases.map(([name, spec], i) => [name, spec, i] as const))("%s", (_name, spec, i) => {
    const params = summarizeParams(graphFromSpec(parseModelSpec(spec)));
    expect({ total: params.total, trainable: params.trainable }).toEqual(reference[i]);
  });
});

describe("saved activations of the convolutional front match autograd's saved tensors on the CPU", () => {
  // Conv1d keeps its input, BatchNorm1d its input, ReLU its output (MaxPool1d reads the same tensor),
  // MaxPool1d int64 indices; under autocast the 16-bit copy of the fp32 input batch. The recurrent
  // part is left out: on the CPU the LSTM runs step by step and keeps other tensors than cuDNN does.
  const specs: [string, Record<string, unknown>][] = [
    ["the bundled cnn-lstm", parse(readFileSync(join(root, "examples/cnn-lstm/model.yaml"), "utf8")) as Record<string, unknown>],
    [
      "stride 2, no batchnorm, no pooling",
      {
        family: "cnn1d-lstm",
        input: 3,
        seq_len: 100,
        conv: [
          { out: 8, kernel: 4, stride: 2 },
          { out: 16, kernel: 3 },
        ],
        batchnorm: false,
        pool: 1,
        lstm: { hidden: 20, layers: 2 },
        output: 4,
      },
    ],
    [
      "even kernel, pool 3 on an odd length",
      {
        family: "cnn1d-lstm",
        input: 4,
        seq_len: 101,
        conv: [
          { out: 6, kernel: 5 },
          { out: 10, kernel: 2 },
        ],
        batchnorm: true,
        pool: 3,
        lstm: { hidden: 8 },
        output: 2,
      },
    ],
  ];
  let reference: Record<"fp32" | "bf16-mixed", number>[] = [];

  it("PyTorch measures them", () => {
    const output = execFileSync(PYTHON, [join(root, "test/torch/saved_conv.py")], { input: JSON.stringify(specs.map(([, s]) => s)), encoding: "utf8" });
    reference = JSON.parse(output) as typeof reference;
    expect(reference).toHaveLength(specs.length);
  });

  it.each(specs.map(([name, spec], i) => [name, spec, i] as const))("%s", (_name, spec, i) => {
    const graph = graphFromSpec(parseModelSpec(spec));
    const conv = graph.blocks.filter((b) => b.name.startsWith("conv."));
    const bytes = (compute: number, mixed: boolean): number =>
      conv
        .flatMap((b) => b.ops)
        .reduce((sum, op) => sum + op.saved.compute * compute + op.saved.fp32 * 4 + (mixed ? op.saved.mixedOnly * 2 : 0) + op.saved.bytes, 0);
    expect(bytes(4, false)).toBe(reference[i]!.fp32);
    expect(bytes(2, true)).toBe(reference[i]!["bf16-mixed"]);
  });
});
