import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseTuneRecord } from "../../src/record/schema.ts";
import { lossParity, parityLine } from "../../src/tune/parity.ts";

// The parity figures docs/tune.md quotes come from these records: real tunes of test/jobs/parity_mlp.py and hf_padded_lm.py
// (the commands are in each record), written by brim tune and kept as they were. Their verdicts are
// checked again from the losses they stored.
const load = (name: string) =>
  parseTuneRecord(JSON.parse(readFileSync(new URL(`../fixtures/tune-parity/${name}.json`, import.meta.url), "utf8")), `${name}.json`);

describe("the committed parity records", () => {
  it("plain MLP, effective batch 16 held (4 × 4 against 16 × 1): the losses match within 1e-5, as stored", () => {
    const record = load("plain");
    const parity = record.parity;
    expect(parity).toMatchObject({ verdict: "match", effective_batch: { before: 16, after: 16, held: true } });
    const again = lossParity(parity?.baseline_losses ?? [], parity?.winner_losses ?? [], parity?.precisions ?? { baseline: "", winner: "" }, true);
    expect(again).toEqual({ verdict: "match", steps: parity?.steps, tolerance: 1e-4, max_diff: parity?.max_diff });
    expect(again.verdict === "match" && again.max_diff).toBeLessThan(1e-5);
    expect(parityLine(again)).toBe(parity?.line);
  });

  it("BatchNorm and an LR scaled from the micro-batch: they part where the record says, both named", () => {
    const parity = load("batchnorm-lr").parity;
    expect(parity?.verdict).toBe("parted");
    const again = lossParity(parity?.baseline_losses ?? [], parity?.winner_losses ?? [], parity?.precisions ?? { baseline: "", winner: "" }, true);
    expect(again).toMatchObject({ verdict: "parted", step: parity?.step, diff: parity?.diff });
    expect(parity?.evidence.map((e) => e.kind)).toEqual(["lr", "batch_norm"]);
    expect(parity?.lr).toEqual({ baseline: [0.05], winner: [0.2] });
  });

  it("an HF causal LM on padded sequences, accumulation 4 × 4 against 16 × 1, its loss per micro-batch: parted, the token-averaged loss named", () => {
    const parity = load("hf-token-loss").parity;
    const again = lossParity(parity?.baseline_losses ?? [], parity?.winner_losses ?? [], parity?.precisions ?? { baseline: "", winner: "" }, true);
    expect(again).toMatchObject({ verdict: "parted", step: parity?.step, diff: parity?.diff });
    expect(parity?.line).toMatch(/expected: the loss is token-averaged per micro-batch \(below\)$/);
    expect(parity?.evidence.map((e) => e.kind)).toEqual(["token_loss"]);
  });

  it("the same job with num_items_in_batch reaching the model's loss: the losses match within 1e-5, normalised over the step", () => {
    const parity = load("hf-num-items").parity;
    const again = lossParity(parity?.baseline_losses ?? [], parity?.winner_losses ?? [], parity?.precisions ?? { baseline: "", winner: "" }, true);
    expect(again).toEqual({ verdict: "match", steps: parity?.steps, tolerance: 1e-4, max_diff: parity?.max_diff });
    expect(again.verdict === "match" && again.max_diff).toBeLessThan(1e-5);
    expect(parity?.evidence.map((e) => e.kind)).toEqual(["token_loss_step"]);
  });
});
