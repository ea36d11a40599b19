// Knobs in a DeepSpeed config: the per-rank micro-batch and the accumulation are the knobs, the global
// train_batch_size is kept equal to micro × accumulation × ranks in every trial and in apply, so that
// DeepSpeed's own check at start never fails. Real JSON files, the real binding resolver and apply.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readConfig } from "../../src/configs/index.ts";
import { RunStore } from "../../src/record/store.ts";
import { applyTune } from "../../src/tune/apply.ts";
import { describeBindings, resolveBindings } from "../../src/knobs/resolve.ts";
import { deepSpeedKnobs, isDeepSpeedConfig } from "../../src/knobs/deepspeed.ts";
import { configBaseline, configEditsByFile } from "../../src/knobs/binding.ts";
import { bindingRecord } from "../../src/tune/record.ts";
import { writeSyntheticTune } from "../analyze/synthetic.ts";

const root = mkdtempSync(join(tmpdir(), "brim-ds-config-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const FULL = `{
  "train_batch_size": 32,
  "train_micro_batch_size_per_gpu": 8,
  "gradient_accumulation_steps": 2,
  "zero_optimization": { "stage": 2 },
  "steps_per_print": 100
}
`;

describe("a DeepSpeed config", () => {
  it("is told from other configs by its own keys", () => {
    expect(isDeepSpeedConfig(JSON.parse(FULL))).toBe(true);
    expect(isDeepSpeedConfig({ train_batch_size: 16, zero_optimization: { stage: 1 } })).toBe(true);
    expect(isDeepSpeedConfig({ train_micro_batch_size_per_gpu: 4 })).toBe(true);
    // a config with a train_batch_size of its own is not DeepSpeed's
    expect(isDeepSpeedConfig({ train_batch_size: 16, lr: 0.1 })).toBe(false);
    expect(isDeepSpeedConfig([1, 2])).toBe(false);
  });

  it("binds the micro-batch and accumulation keys, and keeps the global batch = their product × the ranks the file implies", () => {
    expect(deepSpeedKnobs(JSON.parse(FULL))).toEqual({
      found: [
        { knob: "batch_size", key: "train_micro_batch_size_per_gpu", value: 8 },
        { knob: "accumulation", key: "gradient_accumulation_steps", value: 2 },
      ],
      globalBatch: { key: "train_batch_size", ranks: 2 },
      notes: [],
    });
    // without a global key nothing needs keeping
    expect(deepSpeedKnobs({ train_micro_batch_size_per_gpu: 4, gradient_accumulation_steps: 1 }).globalBatch).toBeNull();
  });

  it("leaves the batch knobs alone, saying why, where the global batch cannot be kept consistent", () => {
    const only = deepSpeedKnobs({ train_batch_size: 16, zero_optimization: { stage: 2 } });
    expect(only.found).toEqual([]);
    expect(only.notes[0]).toMatch(/train_batch_size 16 is set without both .* write both beside it/);
    const odd = deepSpeedKnobs({ train_batch_size: 30, train_micro_batch_size_per_gpu: 8, gradient_accumulation_steps: 2 });
    expect(odd.found).toEqual([]);
    expect(odd.notes[0]).toMatch(/DeepSpeed will refuse it/);
    // the HF Trainer's "auto": its flags are the knobs
    const auto = deepSpeedKnobs({
      train_batch_size: "auto",
      train_micro_batch_size_per_gpu: "auto",
      gradient_accumulation_steps: "auto",
      zero_optimization: {},
    });
    expect(auto.found).toEqual([]);
    expect(auto.notes).toEqual([expect.stringMatching(/are "auto", filled by the HF Trainer/)]);
  });

  it("through resolveBindings: trial edits keep DeepSpeed's check true, trial 0's values come from the micro and accumulation keys", async () => {
    const file = join(root, "ds_config.json");
    writeFileSync(file, FULL);
    const { bindings, documents, notes } = await resolveBindings(
      ["deepspeed", "--num_gpus", "2", "train.py", "--deepspeed_config", "ds_config.json"],
      root,
      [],
    );
    expect(bindings).toEqual([
      { knob: "batch_size", via: "config", file, key: "train_micro_batch_size_per_gpu" },
      { knob: "accumulation", via: "config", file, key: "gradient_accumulation_steps" },
      { knob: "batch_size", via: "config", file, key: "train_batch_size", globalBatch: { ranks: 2 } },
    ]);
    expect(notes.filter((n) => /knob batch_size/.test(n))).toEqual([]);
    expect(configBaseline(bindings, documents)).toEqual({ batch_size: 8, accumulation: 2 });
    expect(describeBindings(bindings, documents, root)).toBe(
      "knobs found: batch_size=8 (ds_config.json: train_micro_batch_size_per_gpu), accumulation=2 (ds_config.json: gradient_accumulation_steps), " +
        "train_batch_size=32 kept = batch_size × accumulation × 2 ranks (ds_config.json: train_batch_size)",
    );
    const edits = configEditsByFile(bindings, { batch_size: 32, accumulation: 1 }).get(file);
    expect(edits).toEqual([
      { key: "train_micro_batch_size_per_gpu", value: 32 },
      { key: "gradient_accumulation_steps", value: 1 },
      { key: "train_batch_size", value: 64 },
    ]);
    expect(bindingRecord(bindings[2]!, documents)).toMatchObject({ key: "train_batch_size", global_batch_ranks: 2 });
    // the file is read as the user wrote it
    expect((await readConfig(file)).get("train_batch_size")).toBe(32);
  });

  it("apply writes the winner's micro-batch, accumulation and the global batch they make, layout kept", async () => {
    const store = new RunStore(join(root, "store"));
    const { tune } = await writeSyntheticTune(store);
    const file = join(root, "apply.json");
    writeFileSync(file, FULL);
    const { bindings, documents } = await resolveBindings(["deepspeed", "train.py", "--deepspeed_config", file], root, []);
    const record = {
      ...tune,
      bindings: bindings.map((b) => bindingRecord(b, documents)),
      trials: tune.trials.map((t) => ({ ...t, knobs: t.index === 0 ? { batch_size: 8, accumulation: 2 } : { batch_size: 32, accumulation: 1 } })),
      // --free-batch's kind of winner: the global batch moves too (32 × 1 × 2 ranks)
      winner: { index: 1, knobs: { batch_size: 32, accumulation: 1 }, speedup: 1.3 },
    };
    await applyTune(record, { force: false, dryRun: false });
    expect(readFileSync(file, "utf8")).toBe(
      FULL.replace('"train_batch_size": 32', '"train_batch_size": 64')
        .replace('"train_micro_batch_size_per_gpu": 8', '"train_micro_batch_size_per_gpu": 32')
        .replace('"gradient_accumulation_steps": 2', '"gradient_accumulation_steps": 1'),
    );
  });
});
