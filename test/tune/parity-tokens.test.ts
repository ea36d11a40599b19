import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { RunStore } from "../../src/record/store.ts";
import type { EventEntry } from "../../src/record/timeline/index.ts";
import type { TuneTrialRecord } from "../../src/record/types.ts";
import { confirmationParity } from "../../src/tune/parity-check.ts";
import { modelFactsOf, parityEvidence, type ParitySide } from "../../src/tune/parity.ts";
import { T0, writeSyntheticRun } from "../analyze/synthetic.ts";

// A loss averaged per token over padded sequences of varying lengths (issue 37): the attach's
// model_facts.token_loss, read from the model's input, named in the parity verdict when the winner
// splits the step otherwise (accumulation, or the micro-batch with the effective batch held).
const root = mkdtempSync(join(tmpdir(), "brim-parity-tokens-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const tokenLoss = (tokens: number[], numItems = false, rows: [number, number] = [4, 32]) => ({
  source: "labels",
  micro_batches: tokens.length,
  tokens,
  row_tokens: rows,
  row_length: 32,
  varying: rows[0] !== rows[1],
  num_items_in_batch: numItems,
});
const factsEvent = (token_loss?: object) => [
  { step: 0, event: "model_facts", details: { lr: [0.001], batch_stat_layers: {}, clip_grad_norm_calls: 0, token_loss } },
];

function side(knobs: Record<string, number>, token_loss: object | undefined): ParitySide {
  const events = factsEvent(token_loss).map((e) => ({ ...e, t: 0, pid: 1, kind: "event", message: null }) as unknown as EventEntry);
  return {
    trial: 1,
    knobs,
    losses: [4.8, 4.7],
    precision: "fp32",
    effectiveBatch: 16,
    microBatch: knobs["batch_size"] ?? null,
    facts: modelFactsOf(events),
  };
}

describe("the token-averaged loss in the parity evidence", () => {
  it("reads token_loss from the model_facts event, and none from an older attach", () => {
    const withTokens = side({ batch_size: 4, accumulation: 4 }, tokenLoss([70, 81, 64, 77]));
    expect(withTokens.facts?.tokenLoss).toEqual({
      source: "labels",
      tokens: [70, 81, 64, 77],
      rowTokens: [4, 32],
      rowLength: 32,
      varying: true,
      numItems: false,
    });
    expect(side({}, undefined).facts?.tokenLoss).toBeNull();
    expect(side({}, { source: "labels", tokens: "many" }).facts?.tokenLoss).toBeNull();
  });

  it("a changed accumulation over varying lengths: the token-averaged loss, with what was seen and what to do", () => {
    const evidence = parityEvidence(
      side({ batch_size: 4, accumulation: 4 }, tokenLoss([70, 81, 64, 77])),
      side({ batch_size: 16, accumulation: 1 }, tokenLoss([292], false, [5, 32])),
    );
    expect(evidence.map((e) => e.kind)).toEqual(["token_loss"]);
    expect(evidence[0]?.text).toBe(
      "your loss is token-averaged per micro-batch over a varying number of tokens (labels with the ignore index -100: 4 to 32 tokens a row of 32; the first optimizer step's micro-batches held 70, 81, 64, 77 tokens in your configuration, 292 in the winner's (accumulation 4 and 1)): the step's loss is then a mean of the micro-batches' means, which another accumulation weighs differently, so accumulation changes it even with the effective batch held; keep accumulation = 1, or pass num_items_in_batch / sum the loss and divide by the tokens of the whole step",
    );
  });

  it("the Hugging Face Trainer passing num_items_in_batch: normalised over the whole step, parity holds", () => {
    const evidence = parityEvidence(
      side({ batch_size: 4, accumulation: 4 }, tokenLoss([70, 81, 64, 77], true)),
      side({ batch_size: 16, accumulation: 1 }, tokenLoss([292], true)),
    );
    expect(evidence.map((e) => e.kind)).toEqual(["token_loss_step"]);
    expect(evidence[0]?.text).toMatch(/normalised over the whole step: the Hugging Face Trainer passes num_items_in_batch .* parity holds, up to rounding$/);
  });

  it("nothing to say with the same split, rows all of one length, or no token facts", () => {
    const full = tokenLoss([128, 128], false, [32, 32]);
    expect(
      parityEvidence(side({ batch_size: 4, accumulation: 4 }, tokenLoss([70, 81])), side({ batch_size: 4, accumulation: 4 }, tokenLoss([64, 77]))),
    ).toEqual([]);
    expect(parityEvidence(side({ batch_size: 4, accumulation: 4 }, full), side({ batch_size: 16, accumulation: 1 }, full))).toEqual([]);
    expect(parityEvidence(side({ batch_size: 4, accumulation: 4 }, undefined), side({ batch_size: 16, accumulation: 1 }, undefined))).toEqual([]);
  });
});

describe("the token-averaged loss in a confirmation's recorded runs", () => {
  const store = new RunStore(join(root, "store"));
  let clock = 0;
  const run = async (batch: number, accumulation: number, loss: (i: number) => number, token_loss: object): Promise<string> => {
    clock += 60;
    const options = { gpu: null, kind: "trial" as const, steps: 24, batch, accumulation, loss, events: factsEvent(token_loss) };
    return (await writeSyntheticRun(store, options, new Date((T0 + clock) * 1000))).id;
  };
  const trial = (index: number, purpose: string, runId: string, knobs: Record<string, number>): TuneTrialRecord => ({
    index,
    run_id: runId,
    knobs,
    purpose,
    end: "ok",
    samples_per_s: 100,
    peak_bytes: null,
    framework_peak_bytes: null,
    gpu_util_mean: null,
    data_wait_share: null,
    duration_s: 3,
    oom_recoveries: 0,
    effective_batch: 16,
  });

  it("the losses part from step 0 and the verdict names the token-averaged loss as the expected cause", async () => {
    const loss = (i: number): number => 4.85 * Math.exp(-i / 30);
    const a = await run(4, 4, loss, tokenLoss([70, 81, 64, 77]));
    const b = await run(16, 1, (i) => loss(i) * 1.004, tokenLoss([292]));
    const parity = await confirmationParity(store, {
      trials: [
        trial(1, "confirm 1/2: your configuration (A), interleaved with the winner", a, { batch_size: 4, accumulation: 4 }),
        trial(2, "confirm 1/2: the winner (B), interleaved with your configuration", b, { batch_size: 16, accumulation: 1 }),
      ],
    });
    expect(parity).toMatchObject({ verdict: "parted", step: 0, effective_batch: { before: 16, after: 16, held: true } });
    expect(parity?.line).toMatch(/expected: the loss is token-averaged per micro-batch \(below\)$/);
    expect(parity?.evidence.map((e) => e.kind)).toEqual(["token_loss"]);
  });
});
