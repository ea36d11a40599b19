import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { RunStore } from "../../src/record/store.ts";
import type { TuneTrialRecord } from "../../src/record/types.ts";
import { renderTuneTable } from "../../src/cli/render-tune.ts";
import { tuneReport } from "../../src/report/model.ts";
import { parseTuneRecord } from "../../src/record/schema.ts";
import { confirmationParity } from "../../src/tune/parity-check.ts";
import { T0, writeSyntheticRun, type SyntheticOptions } from "../analyze/synthetic.ts";

// The parity of a confirmation read from recorded runs: two trial runs in a real store, their
// timelines' step losses compared from step 0, the model facts the attach sent named in the verdict.
const root = mkdtempSync(join(tmpdir(), "brim-parity-record-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let clock = 0;
async function trialRun(store: RunStore, o: SyntheticOptions): Promise<string> {
  clock += 60;
  return (await writeSyntheticRun(store, { gpu: null, kind: "trial", steps: 24, ...o }, new Date((T0 + clock) * 1000))).id;
}

function trial(index: number, purpose: string, runId: string, knobs: Record<string, number>, effective: number): TuneTrialRecord {
  return {
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
    effective_batch: effective,
  };
}

const A = "confirm 1/2: your configuration (A), interleaved with the winner";
const B = "confirm 1/2: the winner (B), interleaved with your configuration";
const loss = (i: number): number => 2.3 * Math.exp(-i / 15);
const facts = (lr: number, layers: Record<string, number> = {}) => [{ step: 0, event: "model_facts", details: { lr: [lr], batch_stat_layers: layers } }];

describe("loss parity of a confirmation, from its recorded runs", () => {
  const store = new RunStore(join(root, "store"));

  it("a held effective batch whose losses agree: same model over the first 20 steps, with the largest difference", async () => {
    const a = await trialRun(store, { batch: 4, accumulation: 4, loss, events: facts(0.05) });
    const b = await trialRun(store, { batch: 16, loss: (i) => loss(i) * (1 + 3e-7), events: facts(0.05) });
    const trials = [
      trial(0, "baseline", a, { batch_size: 4, accumulation: 4 }, 16),
      trial(5, A, a, { batch_size: 4, accumulation: 4 }, 16),
      trial(6, B, b, { batch_size: 16, accumulation: 1 }, 16),
    ];
    const parity = await confirmationParity(store, { trials });
    expect(parity).toMatchObject({
      verdict: "match",
      steps: 20,
      baseline_trial: 5,
      winner_trial: 6,
      effective_batch: { before: 16, after: 16, held: true },
      evidence: [],
    });
    expect(parity?.line).toBe("same model: the first 20 steps' losses match your configuration's within 1e-4 (largest difference 3e-7)");
    expect(parity?.baseline_losses.slice(0, 2)).toEqual([loss(0), loss(1)]);
  });

  it("names the first step they part and by how much, and BatchNorm under a changed micro-batch as the expected cause", async () => {
    const bn = { BatchNorm1d: 2 };
    const a = await trialRun(store, { batch: 4, accumulation: 4, loss, events: facts(0.05, bn) });
    const b = await trialRun(store, { batch: 16, loss: (i) => (i >= 1 ? loss(i) * 1.03 : loss(i)), events: facts(0.05, bn) });
    const parity = await confirmationParity(store, {
      trials: [trial(3, A, a, { batch_size: 4, accumulation: 4 }, 16), trial(4, B, b, { batch_size: 16, accumulation: 1 }, 16)],
    });
    expect(parity).toMatchObject({ verdict: "parted", step: 1 });
    expect(parity?.line).toMatch(
      /^not the same losses: they part at step 1 \(yours 2\.15\d+, the winner's 2\.2\d+, 3\.0 % apart \(tolerance 1e-4\)\): expected: the model has BatchNorm/,
    );
    expect(parity?.evidence.map((e) => e.kind)).toEqual(["batch_norm"]);
    expect(parity?.evidence[0]?.text).toMatch(/BatchNorm1d ×2.*yours 4, the winner's 16/);
  });

  it("a learning rate the script scaled with the batch size is named with both values", async () => {
    const a = await trialRun(store, { batch: 4, accumulation: 4, loss, events: facts(0.1) });
    const b = await trialRun(store, { batch: 16, loss: (i) => loss(i) * (i > 0 ? 0.9 : 1), events: facts(0.4) });
    const parity = await confirmationParity(store, {
      trials: [trial(1, A, a, { batch_size: 4, accumulation: 4 }, 16), trial(2, B, b, { batch_size: 16, accumulation: 1 }, 16)],
    });
    expect(parity?.verdict).toBe("parted");
    expect(parity?.line).toMatch(/expected: the learning rate moved/);
    expect(parity?.evidence[0]?.text).toMatch(/^learning rate moved with the batch size: 0\.1 in your configuration, 0\.4 in the winner's \(×4\.00\)/);
  });

  it("gradient clipping per micro-batch under a changed accumulation is named with its calls", async () => {
    const clipped = (calls: number) => [{ step: 0, event: "model_facts", details: { lr: [0.05], batch_stat_layers: {}, clip_grad_norm_calls: calls } }];
    const a = await trialRun(store, { batch: 4, accumulation: 4, loss, events: clipped(4) });
    const b = await trialRun(store, { batch: 16, loss: (i) => loss(i) * (i > 2 ? 1.01 : 1), events: clipped(1) });
    const parity = await confirmationParity(store, {
      trials: [trial(1, A, a, { batch_size: 4, accumulation: 4 }, 16), trial(2, B, b, { batch_size: 16, accumulation: 1 }, 16)],
    });
    expect(parity).toMatchObject({ verdict: "parted", step: 3 });
    expect(parity?.line).toMatch(/expected: gradients are clipped per micro-batch \(below\)$/);
    expect(parity?.evidence.map((e) => e.kind)).toEqual(["grad_clip"]);
    expect(parity?.evidence[0]?.text).toMatch(
      /^gradient clipping by norm per micro-batch \(4 call\(s\) in your configuration's first optimizer step, 1 in the winner's; accumulation 4 and 1\)/,
    );
  });

  it("a winner that changes the effective batch is said loudly, with the losses compared by samples seen", async () => {
    const a = await trialRun(store, { batch: 16, loss, events: facts(0.1) });
    const b = await trialRun(store, { batch: 64, loss: (i) => loss(4 * i), events: facts(0.1) });
    const parity = await confirmationParity(store, { trials: [trial(1, A, a, { batch_size: 16 }, 16), trial(2, B, b, { batch_size: 64 }, 64)] });
    expect(parity?.verdict).toBe("batch_changed");
    expect(parity?.line).toMatch(
      /^EFFECTIVE BATCH CHANGES: 16 → 64 samples per optimizer step \(×4\.00\).*after 384 samples yours is [\d.]+ \(step 23\), the winner's [\d.]+ \(step 5\)/,
    );
    expect(parity?.evidence[0]?.text).toMatch(
      /learning rate unchanged at 0\.1 while the effective batch went ×4\.00: scale it \(linearly 0\.4, by the square root 0\.2\)/,
    );
  });

  it("is stored in tune.json, printed after the winner, and shown in the report", async () => {
    const a = await trialRun(store, { batch: 4, accumulation: 4, loss });
    const b = await trialRun(store, { batch: 16, loss });
    const trials = [
      trial(0, "baseline", a, { batch_size: 4, accumulation: 4 }, 16),
      trial(1, A, a, { batch_size: 4, accumulation: 4 }, 16),
      trial(2, B, b, { batch_size: 16, accumulation: 1 }, 16),
    ];
    const parity = await confirmationParity(store, { trials });
    const record = parseTuneRecord(
      {
        schema: "brim.tune/v1",
        id: "20261129-050000-ab12",
        command: ["python", "t.py"],
        cwd: root,
        bindings: [],
        cap_bytes: 2 ** 30,
        cap_scope: "ram",
        started_at: new Date().toISOString(),
        ended_at: new Date().toISOString(),
        trials,
        winner: { index: 2, knobs: { batch_size: 16, accumulation: 1 }, speedup: 2 },
        stop_reason: "converged",
        parity,
      },
      "tune.json",
    );
    expect(record.parity?.verdict).toBe("match");
    expect(renderTuneTable(record, 200)).toMatch(/winner: trial 2: .*\nsame model: the first 20 steps' losses match/);
    expect(tuneReport(record).facts).toContainEqual({ label: "loss parity", value: record.parity?.line });
  });

  it("no confirmation pair that ran both sides: nothing to compare", async () => {
    expect(await confirmationParity(store, { trials: [trial(0, "baseline", "20251122-030000-0a0a", {}, 16)] })).toBeNull();
  });
});
