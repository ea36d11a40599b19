import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { summarizeParams } from "../../src/plan/graph.ts";
import { graphFromHfConfig } from "../../src/plan/hf.ts";
import { plan } from "../../src/plan/planner.ts";
import { parseModelFile } from "../../src/plan/model-file.ts";

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`../fixtures/hf/${name}.json`, import.meta.url), "utf8")) as Record<string, unknown>;

describe("Hugging Face configs", () => {
  // totals as the model cards and `sum(p.numel() for p in model.parameters())` give them
  it.each([
    ["bert-base-uncased", 109_482_240],
    ["roberta-base", 124_645_632],
    ["gpt2", 124_439_808],
    ["llama-2-7b", 6_738_415_616],
    ["mistral-7b", 7_241_732_096],
    ["qwen2-0.5b", 494_032_768],
  ])("%s has %d parameters", (name, total) => {
    expect(summarizeParams(graphFromHfConfig(fixture(name), { seqLen: 128 })).total).toBe(total);
  });

  it("rejects an unsupported model_type naming the field", () => {
    expect(() => graphFromHfConfig({ model_type: "t5" })).toThrow(/model_type.*not supported/);
  });

  it("rejects a missing size naming the field", () => {
    const config = fixture("gpt2");
    delete config["n_embd"];
    expect(() => graphFromHfConfig(config, { file: "config.json" })).toThrow("config.json: n_embd: missing");
  });

  it("plans gpt2 and grows activations with --seq-len", () => {
    const model = parseModelFile(readFileSync(new URL("../fixtures/hf/gpt2.json", import.meta.url), "utf8"), "gpt2.json");
    const short = plan(model, { gpu: "a100-80gb", seqLen: 256, batch: 8 });
    const long = plan(model, { gpu: "a100-80gb", seqLen: 1024, batch: 8 });
    expect(long.memory.components.activations).toBeGreaterThan(3.5 * short.memory.components.activations);
    expect(() => plan(model, { gpu: "a100-80gb", seqLen: 4096 })).toThrow(/seq_len: --seq-len 4096 is longer than the model's 1024 positions/);
  });
});
