import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import {
  fitFootprint,
  optimizerOf,
  planScript,
  pointFromEvents,
  profileFromFit,
  PROFILE_ACCURACY,
  type FootprintEvent,
  type MeasuredPoint,
} from "../../src/plan/script.ts";
import { footprintFromProfile } from "../../src/plan/profile.ts";
import { renderScriptPlan } from "../../src/cli/render-plan-script.ts";

const REPO = resolve(import.meta.dirname, "..", "..");

const params: NonNullable<FootprintEvent["params"]> = {
  total: 1_000_000,
  trainable: 1_000_000,
  by_dtype: { float32: 1_000_000 },
  buffer_bytes: 0,
  tensors: [
    { name: "w1", shape: [1000, 500], trainable: true },
    { name: "w2", shape: [500, 1000], trainable: true },
  ],
  tensors_listed: true,
};

function event(forward: number, samples: number | null, saved: number, extra: Partial<FootprintEvent> = {}): FootprintEvent {
  return {
    forward,
    saved_bytes: saved,
    largest_saved_bytes: saved / 4,
    batch_bytes: samples === null ? null : samples * 100,
    batch_samples: samples,
    grad_bytes: 4_000_000,
    optimizer_state_bytes: forward > 1 ? 8_000_000 : 0,
    optimizers: ["AdamW"],
    autocast: null,
    ...(forward === 1 ? { params } : {}),
    ...extra,
  };
}

const point = (micro: number, saved: number): MeasuredPoint => ({
  run_id: `r${micro}`,
  micro_batch: micro,
  forwards: 3,
  saved_bytes: saved,
  recurrent: null,
  conv_workspace_bytes: null,
  largest_saved_bytes: saved / 4,
  batch_bytes: micro * 100,
  grad_bytes: 4_000_000,
  optimizer_state_bytes: 8_000_000,
  rss_peak_bytes: null,
  autocast: null,
});

describe("the script path's footprint", () => {
  it("takes a run's micro-batch from the batches it saw (a short last batch is not it) and its largest forward there", () => {
    const events = [event(1, 32, 3_200_000), event(2, 32, 3_300_000), event(3, 7, 700_000)];
    const { point: p, optimizers } = pointFromEvents(events, "run-a", null, 123);
    expect(p).toMatchObject({ micro_batch: 32, saved_bytes: 3_300_000, batch_bytes: 3200, optimizer_state_bytes: 8_000_000, forwards: 3, rss_peak_bytes: 123 });
    expect(optimizers).toEqual(["AdamW"]);
  });

  it("falls back on the knob's micro-batch when the job has no DataLoader, and refuses a run with no backward", () => {
    expect(pointFromEvents([event(1, null, 1000)], "r", 20, null).point.micro_batch).toBe(20);
    expect(() => pointFromEvents([], "run-x", 20, null)).toThrow(/run-x ran no backward/);
  });

  it("fits fixed and per-sample parts through two points; one point counts everything per sample", () => {
    const two = fitFootprint([point(32, 3_300_000), point(16, 1_700_000)]);
    expect(two).toMatchObject({ method: "two-point", saved_per_sample_bytes: 100_000, saved_fixed_bytes: 100_000, input_per_sample_bytes: 100 });
    const one = fitFootprint([point(32, 3_300_000)]);
    expect(one).toMatchObject({ method: "one-point", saved_fixed_bytes: 0 });
    expect(one.saved_per_sample_bytes).toBeCloseTo(103_125);
  });

  it("keeps bytes saved under autocast as that precision's, not as fp32 (a 16-bit plan would halve them twice)", () => {
    const bf16 = (micro: number, saved: number): MeasuredPoint => ({ ...point(micro, saved), autocast: "torch.bfloat16" });
    const profile = profileFromFit(fitFootprint([bf16(16, 900_000), bf16(32, 1_700_000)]), params, "train.py");
    expect(profile.per_sample.saved_bytes).toEqual({ fp32: 100_000, "bf16-mixed": 50_000 });
    expect(profile.fixed?.saved_bytes).toEqual({ "bf16-mixed": 100_000 });
    const footprint = footprintFromProfile(profile);
    expect(footprint.activations["bf16-mixed"].perSample).toBe(50_000);
    expect(footprint.activations["bf16-mixed"].fixed).toBe(100_000);
    expect(footprint.activations.fp32.perSample).toBe(100_000);
    const plain = profileFromFit(fitFootprint([point(16, 900_000), point(32, 1_700_000)]), params, "train.py");
    expect(plain.per_sample.saved_bytes).toEqual({ fp32: 50_000 });
  });

  it("counts per sample only the part of the largest saved tensor that grows with the batch", () => {
    // at both micro-batches the largest saved tensor is a 16-bit weight copy of 983,040 B (nbeats under bf16 autocast)
    const at = (micro: number, saved: number, largest: number): MeasuredPoint => ({ ...point(micro, saved), largest_saved_bytes: largest });
    const fixedLargest = profileFromFit(fitFootprint([at(16, 23_821_248, 983_040), at(32, 24_699_840, 983_040)]), params, "train.py");
    expect(fixedLargest.per_sample.largest_saved_bytes).toBe(0);
    const growing = profileFromFit(fitFootprint([at(16, 1_689_600, 61_440), at(32, 3_379_200, 122_880)]), params, "train.py");
    expect(growing.per_sample.largest_saved_bytes).toBe(3_840);
    expect(profileFromFit(fitFootprint([at(32, 3_379_200, 122_880)]), params, "train.py").per_sample.largest_saved_bytes).toBe(3_840);
  });

  it("names the optimizer from its class and the state it held per trainable parameter", () => {
    expect(optimizerOf(["AdamW"], 8_000, 1_000)).toBe("adamw");
    expect(optimizerOf(["Adam"], 8_000, 1_000)).toBe("adam");
    expect(optimizerOf(["SGD"], 4_000, 1_000)).toBe("sgd-momentum");
    expect(optimizerOf(["SGD"], 0, 1_000)).toBe("sgd");
  });

  // What the footprint of `brim plan -- python keras_train.py` holds for a Keras 3 model compiled
  // with keras.optimizers.Adam on the torch backend: its layers are torch modules (parameters
  // counted, backward seen) but Keras's optimizer is not a torch.optim.Optimizer, so no class and
  // no state are reported; it was planned as sgd (no state) before.
  it("plans an optimizer brim could not see (Keras's Adam) as adamw, never as sgd, and says so", () => {
    const keras = [
      event(1, null, 1_000_000, { optimizers: [], optimizer_state_bytes: 0 }),
      event(2, null, 1_000_000, { optimizers: [], optimizer_state_bytes: 0 }),
    ];
    const { point: p, params: seen, optimizers } = pointFromEvents(keras, "run-keras", 32, null);
    expect(optimizers).toEqual([]);
    expect(optimizerOf(optimizers, p.optimizer_state_bytes, seen.trainable)).toBe("adamw");
    const options = {
      command: ["python", "keras_train.py"],
      gpus: ["a100-80gb"],
      yours: { micro_batch: 32, accumulation: 1, precision: "fp32" as const, precision_from: "test" },
    };
    const unseen = planScript([p], seen, optimizers, options);
    expect(unseen).toMatchObject({ optimizer: "adamw", optimizer_from: "unseen" });
    expect(unseen.provenance.optimizer_state.provenance).toBe("modelled");
    expect(unseen.provenance.optimizer_state.how).toMatch(
      /^the job created no torch\.optim optimizer \(Keras's own, optax or a hand-written update are not seen\): planned as adamw, 2 states per parameter; give --optimizer/,
    );
    const given = planScript([p], seen, optimizers, { ...options, optimizer: "sgd" });
    expect(given).toMatchObject({ optimizer: "sgd", optimizer_from: "--optimizer" });
    expect(given.gpus[0]?.yours.peak_bytes).toBeLessThan(unseen.gpus[0]?.yours.peak_bytes ?? 0);
    expect(renderScriptPlan(unseen)).toMatch(
      /optimizer none brim can see \(no torch\.optim optimizer: Keras's own, optax or a hand-written update\) · planned as adamw/,
    );
    expect(renderScriptPlan(planScript([p], seen, ["SGD"], options))).toMatch(/optimizer SGD \(planned as sgd\)/);
  });
});

describe("planScript", () => {
  const points = [point(16, 1_700_000), point(32, 3_300_000)];
  const plan = planScript(points, params, ["AdamW"], {
    command: ["python", "train.py"],
    gpus: ["t4", "a100-80gb", "h100-sxm"],
    yours: { micro_batch: 4, accumulation: 8, precision: "bf16-mixed", precision_from: "test" },
  });

  it("plans every GPU asked, with the largest micro-batch per precision (none where the card has no fast bf16)", () => {
    expect(plan.gpus.map((g) => g.gpu.id)).toEqual(["t4", "a100-80gb", "h100-sxm"]);
    const [t4, a100] = plan.gpus;
    expect(t4?.largest["bf16-mixed"]).toBeNull();
    expect(t4?.largest.fp32).toBeGreaterThan(1000);
    expect(a100?.largest["bf16-mixed"]).toBeGreaterThan(a100?.largest.fp32 ?? Infinity);
    // the T4 plans your bf16-mixed config in fp16-mixed
    expect(t4?.yours.precision).toBe("fp16-mixed");
  });

  it("keeps the effective batch: the largest divisor of it that fits, and its share of the card", () => {
    const h100 = plan.gpus[2];
    expect(plan.yours.effective_batch).toBe(32);
    expect(h100?.better).toMatchObject({ micro_batch: 32, accumulation: 1 });
    expect(h100?.better?.peak_bytes).toBeGreaterThan(h100?.yours.peak_bytes ?? Infinity);
    expect(h100?.yours.share_of_gpu).toBeCloseTo((h100?.yours.peak_bytes ?? 0) / (h100?.gpu.memory_bytes ?? 1), 3);
  });

  it("says where each figure comes from: GPU-only terms calibrated on the H100, defaults elsewhere", () => {
    expect(plan.gpus[2]?.calibration).toMatch(/hopper/);
    expect(plan.gpus[2]?.gpu_terms.every((t) => t.provenance === "calibrated")).toBe(true);
    expect(plan.gpus[0]?.calibration).toBeNull();
    expect(plan.gpus[0]?.gpu_terms.every((t) => t.provenance === "default")).toBe(true);
    expect(plan.provenance.activations.provenance).toBe("measured");
    expect(plan.provenance.temporaries.provenance).toBe("modelled");
    expect(plan.optimizer).toBe("adamw");
  });

  it("quotes the validation record as it is", () => {
    const record = JSON.parse(readFileSync(join(REPO, PROFILE_ACCURACY.record), "utf8")) as {
      results: { source: string; mode: string; pairs: number; median_abs_error: number; worst_abs_error: number }[];
      kept_out: { source: string; job: string; terms: string[]; pairs: number; median_error: number; worst_error: number }[];
    };
    const row = record.results.find((r) => r.source === "script" && r.mode === "leave-one-job-out");
    expect(row).toMatchObject({
      pairs: PROFILE_ACCURACY.pairs,
      median_abs_error: PROFILE_ACCURACY.median_abs_error,
      worst_abs_error: PROFILE_ACCURACY.worst_abs_error,
    });
    const shared = record.results.find((r) => r.source === "script" && r.mode === "leave-one-job-out, jobs with no term of their own");
    expect(shared).toMatchObject(PROFILE_ACCURACY.no_own_term);
    const kept = record.kept_out.filter((k) => k.source === "script");
    expect(kept).toHaveLength(1);
    expect(kept[0]).toMatchObject({ ...PROFILE_ACCURACY.convolution, terms: ["the convolutions' cuDNN workspace"] });
  });

  it("quotes, for a model with convolutions, what the one recorded such model showed", () => {
    const points = [point(16, 1_600_000), point(32, 3_200_000)];
    const options = {
      command: ["python", "train.py"],
      gpus: ["t4"],
      yours: { micro_batch: 32, accumulation: 1, precision: "fp32" as const, precision_from: "the run" },
    };
    expect(planScript(points, params, ["Adam"], options).accuracy.for_this_model).toBe("no_own_term");
    expect(planScript(points, params, ["Adam"], { ...options, convolutions: true }).accuracy.for_this_model).toBe("convolution");
  });
});
