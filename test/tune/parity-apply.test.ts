import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { editConfigText, parseConfig } from "../../src/configs/index.ts";
import { RunStore } from "../../src/record/store.ts";
import type { TuneRecord } from "../../src/record/types.ts";
import { applyTune } from "../../src/tune/apply.ts";
import { applyNote, parityRefusal } from "../../src/tune/parity.ts";
import { writeSyntheticTune } from "../analyze/synthetic.ts";

// `brim apply` keeps the promise of issue 37: each key it changes gets a comment above it saying what
// the tune held and what the loss parity showed; the user's own comments and every other byte stay.
const root = mkdtempSync(join(tmpdir(), "brim-parity-apply-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const matched: NonNullable<TuneRecord["parity"]> = {
  verdict: "match",
  line: "same model: …",
  effective_batch: { before: 16, after: 16, held: true },
  baseline_trial: 3,
  winner_trial: 4,
  precisions: { baseline: "fp32", winner: "fp32" },
  steps: 19,
  tolerance: 1e-4,
  max_diff: 2e-7,
  baseline_losses: [],
  winner_losses: [],
  evidence: [],
  lr: { baseline: [0.05], winner: [0.05] },
};

describe("the note apply writes on each changed key", () => {
  it("says what was held and what parity showed", () => {
    expect(applyNote({ id: "20261129-052406-f6a8", parity: matched })).toBe(
      "brim tune 20261129-052406-f6a8: effective batch 16 held (micro-batch × accumulation), learning rate 0.05 unchanged; loss parity: the first 19 steps' losses match within 1e-4 (largest difference 2e-7)",
    );
    const parted = { ...matched, verdict: "parted" as const, step: 0, diff: 0.015, lr: { baseline: [0.05], winner: [0.2] } };
    expect(applyNote({ id: "t", parity: parted })).toBe(
      "brim tune t: effective batch 16 held (micro-batch × accumulation), learning rate moved 0.05 → 0.2 with the batch size; loss parity: the losses part at step 0 (1.5 % apart)",
    );
    // the evidence's cause goes with it: a winner that only adds loader workers parts at step 0 by design
    const workers = { ...matched, verdict: "parted" as const, step: 0, diff: 0.00078, evidence: [{ kind: "loader_workers", text: "num_workers 0 → 8: …" }] };
    expect(applyNote({ id: "t", parity: workers })).toBe(
      "brim tune t: effective batch 16 held (micro-batch × accumulation), learning rate 0.05 unchanged; loss parity: the losses part at step 0 (0.078 % apart), expected: loader workers draw their own random numbers (augmentation)",
    );
    expect(applyNote({ id: "t" })).toBeNull();
  });

  it("goes on the line above the key, at its indentation; the user's comments stay, and brim's earlier note is replaced", () => {
    const doc = parseConfig("data:\n  # per device\n  batch_size: 4  # small\n  accumulation: 4\n", "yaml", "c.yaml");
    const { text } = editConfigText(doc, [
      { key: "data.batch_size", value: 16, comment: "brim tune a: held" },
      { key: "data.accumulation", value: 1, comment: "brim tune a: held" },
    ]);
    expect(text).toBe("data:\n  # per device\n  # brim tune a: held\n  batch_size: 16 # small\n  # brim tune a: held\n  accumulation: 1\n");
    const again = editConfigText(parseConfig(text, "yaml", "c.yaml"), [{ key: "data.batch_size", value: 32, comment: "brim tune b: held" }]);
    expect(again.text).toBe("data:\n  # per device\n  # brim tune b: held\n  batch_size: 32 # small\n  # brim tune a: held\n  accumulation: 1\n");
    const toml = editConfigText(parseConfig("[train]\r\nbatch_size = 4\r\n", "toml", "c.toml"), [
      { key: "train.batch_size", value: 16, comment: "brim tune a: held" },
    ]);
    expect(toml.text).toBe("[train]\r\n# brim tune a: held\r\nbatch_size = 16\r\n");
    // JSON has no comments: the value alone
    const json = editConfigText(parseConfig('{"batch_size": 4}\n', "json", "c.json"), [{ key: "batch_size", value: 16, comment: "brim tune a: held" }]);
    expect(json.text).toBe('{"batch_size": 16}\n');
  });

  it("brim apply writes it from the tune's record, on the changed keys only", async () => {
    const store = new RunStore(join(root, "store"));
    const { tune } = await writeSyntheticTune(store);
    const config = join(root, "apply.yaml");
    writeFileSync(config, "data_loader:\n  batch_size: 32 # per device\n  num_workers: 0\n");
    const record: TuneRecord = {
      ...tune,
      bindings: [
        { knob: "batch_size", via: "config", file: config, key: "data_loader.batch_size" },
        { knob: "num_workers", via: "config", file: config, key: "data_loader.num_workers" },
      ],
      trials: tune.trials.map((t) => ({ ...t, knobs: { ...t.knobs, num_workers: 0 } })),
      winner: { index: 1, knobs: { batch_size: 64, num_workers: 0 }, speedup: 1.5 },
      parity: { ...matched, verdict: "batch_changed", effective_batch: { before: 32, after: 64, held: false } },
    };
    await applyTune(record, { force: true, dryRun: false });
    expect(readFileSync(config, "utf8")).toBe(
      `data_loader:\n  # brim tune ${tune.id}: effective batch changed 32 → 64, learning rate 0.05 unchanged; losses not compared step by step\n  batch_size: 64 # per device\n  num_workers: 0\n`,
    );
  });
});

describe("a winner whose loss goes non-finite", () => {
  it("is refused, with the step, the precision and the fallback named", () => {
    const nonfinite = { ...matched, verdict: "nonfinite" as const, step: 3, winner: "nan", precision: "fp16-mixed" };
    expect(parityRefusal(nonfinite)).toEqual({
      reason: "the best configuration found is not safe to apply: its loss is nan at step 3 under fp16-mixed, where yours stayed finite",
      next: "keep your precision, or try bf16-mixed where the GPU has it (--knob precision=bf16-mixed), and tune again",
    });
    expect(parityRefusal(matched)).toBeNull();
    expect(parityRefusal(undefined)).toBeNull();
  });
});
