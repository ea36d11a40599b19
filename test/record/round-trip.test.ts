import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadTune } from "../../src/record/load.ts";
import { RunStore } from "../../src/record/store.ts";
import { summarizeRun } from "../../src/record/summary.ts";
import type { RunMeta, TuneRecord } from "../../src/record/types.ts";
import { tuneReport } from "../../src/report/model.ts";
import { trialRecord } from "../../src/tune/record.ts";
import type { TrialResult } from "../../src/tune/types.ts";
import { syntheticRun } from "../analyze/synthetic.ts";

const root = mkdtempSync(join(tmpdir(), "brim-round-trip-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const ok: TrialResult = {
  end: "ok",
  samplesPerSecond: 812.5,
  stepSeconds: [0.04, 0.041],
  peakBytes: 6e9,
  frameworkPeakBytes: 5.5e9,
  durationS: 31.2,
  oomRecoveries: 0,
  gpuUtilMean: 0.93,
  dataWaitShare: 0.02,
  smActivityMean: 0.71,
  failure: null,
  fixedCostS: 9.5,
  measuredS: 12.1,
  stoppedBy: "stable",
  samplesPerStep: 32,
};
const crashed: TrialResult = {
  end: "crashed",
  samplesPerSecond: null,
  stepSeconds: [],
  peakBytes: 7.9e9,
  frameworkPeakBytes: null,
  durationS: 4,
  oomRecoveries: 1,
  failure: { kind: "memory", cause: "CUDA out of memory" },
  tail: ["Traceback (most recent call last):", "torch.OutOfMemoryError: CUDA out of memory"],
  fixedCostS: null,
  measuredS: null,
  stoppedBy: null,
  samplesPerStep: null,
};

/** A tune.json with every field the tuner writes. */
function fullTune(id: string): TuneRecord {
  return {
    schema: "brim.tune/v1",
    id,
    command: ["python", "train.py", "--batch-size", "{batch_size}"],
    cwd: "/work/job",
    bindings: [
      { knob: "batch_size", via: "template" },
      { knob: "precision", via: "config", file: "/work/job/c.yaml", key: "trainer.precision", file_sha256: "ab".repeat(32) },
    ],
    cap_bytes: 8e9,
    cap_scope: "gpu",
    effective_batch: 64,
    started_at: "2026-11-22T10:10:00.000Z",
    ended_at: "2026-11-22T10:20:00.000Z",
    trials: [trialRecord(0, { batch_size: 32 }, "baseline", ok, "20261122-101001-aa01"), trialRecord(1, { batch_size: 128 }, "memory probe", crashed, null)],
    winner: null,
    stop_reason: "converged",
    noise: 0.012,
    strategy: "brim",
    memory_line: { intercept_bytes: 1e9, bytes_per_sample: 2e7, margin_bytes: 5e8, predicted_max_micro_batch: 96 },
    notes: ["batch_size is held by the template"],
    budget: { max_trials: 12, max_time_s: 600 },
    effective_batch_policy: { kind: "held", before: 64, after: null, text: "effective batch held at 64" },
    no_winner: { reason: "no trial finished under the cap with a measured throughput", next: "look at each trial's end" },
  };
}

describe("a record read back is the record written", () => {
  it("tune.json: every field the tuner writes comes back, deep-equal", async () => {
    const store = new RunStore(join(root, "tune"));
    const written = fullTune("20261122-101000-aa01");
    for (const trial of written.trials) expect(Object.values(trial)).not.toContain(undefined);
    await store.writeTune(written);
    expect(await store.readTune(written.id)).toEqual(written);
    const winning = { ...fullTune("20261122-101000-aa02"), winner: { index: 0, knobs: { batch_size: 32 }, speedup: 1.25 }, no_winner: null };
    await store.writeTune(winning);
    expect(await store.readTune(winning.id)).toEqual(winning);
  });

  it("run.json: every field comes back, deep-equal", async () => {
    const store = new RunStore(join(root, "run"));
    const { meta, timeline } = syntheticRun();
    const id = "20261122-101500-3f2a";
    const written: RunMeta = {
      ...meta,
      id,
      end: { cause: "ok", exit_code: 0, signal: null, message: "finished" },
      summary: { ...summarizeRun(timeline, { treeGpuBytes: 7e9, treeRssBytes: 3e9 }, 61.5), peak_tree_pss_bytes: 2.5e9 },
      unguarded_since: "2026-11-22T10:16:00.000Z",
    };
    mkdirSync(store.runDir(id), { recursive: true });
    writeFileSync(join(store.runDir(id), "run.json"), JSON.stringify(written));
    expect(await store.readRunMeta(id)).toEqual(written);
  });

  it("keeps the fields a newer brim writes, at every depth", async () => {
    const store = new RunStore(join(root, "newer"));
    const tune = fullTune("20261122-101000-aa03");
    await store.writeTune(tune);
    const path = join(store.tuneDir(tune.id), "tune.json");
    const raw = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown> & { trials: Record<string, unknown>[]; budget: Record<string, unknown> };
    raw.future = { a: 1 };
    raw.budget.max_energy_j = 5000;
    (raw.trials[1] as { failure: Record<string, unknown> }).failure.exit_code = 137;
    raw.trials[0] = { ...raw.trials[0], energy_j: 12.5 };
    writeFileSync(path, JSON.stringify(raw));
    expect(await store.readTune(tune.id)).toEqual(raw);
  });
});

describe("a no-winner tune read back reads as one verdict", () => {
  it("the report says why there is no winner and what to try, and nothing that contradicts it", async () => {
    const store = new RunStore(join(root, "verdict"));
    const noWinner = { reason: "the samples the job reports per step do not follow the micro-batch", next: "tune with --fix batch_size" };
    const tune = {
      ...fullTune("20261122-101000-aa04"),
      stop_reason: "untrusted",
      no_winner: noWinner,
      notes: ["winner: batch_size=32 — 812 samples/s over 2 trials (×1.00)"],
    };
    await store.writeTune(tune);
    const { tune: read, runs } = await loadTune(store, tune.id);
    const model = tuneReport(read, runs);
    const page = JSON.stringify(model);
    expect(model.facts.find((f) => f.label === "winner")?.value).toBe(`none: ${noWinner.reason}`);
    expect(model.notes).toContain(`Next: ${noWinner.next}.`);
    expect(page).not.toMatch(/×1\.00|winner: |no trial finished with a throughput/);
  });
});
