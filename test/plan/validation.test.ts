// Plan accuracy: the pure scoring and fitting functions, and the recorded H100 pairs scored with
// the current code. Fails when the code's accuracy falls below the committed figures
// (bench/results/gpu/nvidia-h100-80gb-hbm3/plan-validation.json, written by
// `node bench/gpu/plan-validation.mjs --write …`), or when the shipped calibration is not what the
// fit makes from the recorded pairs.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { reanchor } from "../../src/plan/anchor.ts";
import { CALIBRATIONS } from "../../src/plan/calibrations.ts";
import { DEFAULT_CONSTANTS, resolveConstants } from "../../src/plan/constants.ts";
import { parseModelFile } from "../../src/plan/model-file.ts";
import { plan } from "../../src/plan/planner.ts";
import {
  accuracy,
  errorsOf,
  fitConstants,
  keptOut,
  oneTrialErrors,
  ownTerms,
  pairsFromRecords,
  predict,
  validate,
  type AccuracyRecord,
  type ValidationResult,
} from "../../src/plan/validation.ts";

const root = new URL("../../", import.meta.url).pathname;
const results = join(root, "bench/results/gpu/nvidia-h100-80gb-hbm3");
const load = (path: string) => parseModelFile(readFileSync(join(root, path), "utf8"), path);
const records = readFileSync(join(results, "plan-accuracy.jsonl"), "utf8")
  .split("\n")
  .filter((l) => l.trim() !== "")
  .map((l) => JSON.parse(l) as AccuracyRecord);

describe("accuracy", () => {
  it("median, worst and the share of under-estimates beyond 3 %", () => {
    expect(accuracy([0.01, -0.05, 0.02, -0.02])).toEqual({ pairs: 4, median_abs_error: 0.02, worst_abs_error: 0.05, under_3pct_share: 0.25 });
    expect(accuracy([0.04])).toEqual({ pairs: 1, median_abs_error: 0.04, worst_abs_error: 0.04, under_3pct_share: 0 });
    expect(accuracy([])).toEqual({ pairs: 0, median_abs_error: null, worst_abs_error: null, under_3pct_share: null });
  });
});

describe("re-anchoring on one trial", () => {
  const { pairs } = pairsFromRecords(records, "spec", load);
  const lstm = pairs.filter((p) => p.job === "lstm" && p.precision === "fp32").sort((a, b) => a.micro_batch - b.micro_batch);
  const k = { ...DEFAULT_CONSTANTS, ...CALIBRATIONS[0]!.constants };

  it("meets the measurement at the anchor, and scales only the batch-proportional part", () => {
    const anchor = lstm[2]!;
    const { peakAt, scale, on } = reanchor(anchor.footprint, anchor.setup, k, { micro_batch: anchor.micro_batch, peak_bytes: anchor.measured });
    expect(on).toBe("tree");
    expect(peakAt(anchor.micro_batch)).toBeCloseTo(anchor.measured, -3);
    expect(scale).toBeGreaterThan(0.8);
    expect(scale).toBeLessThan(1.2);
    // a job measured at twice the modelled per-sample memory: the other micro-batches follow
    const fixed = predict({ ...anchor, micro_batch: 0 }, k);
    const doubled = fixed + 2 * (predict(anchor, k) - fixed);
    const twice = reanchor(anchor.footprint, anchor.setup, k, { micro_batch: anchor.micro_batch, peak_bytes: doubled });
    expect(twice.scale).toBeCloseTo(2, 1);
    const other = lstm[3]!;
    expect((twice.peakAt(other.micro_batch) - fixed) / (2 * (predict(other, k) - fixed))).toBeCloseTo(1, 2);
  });

  it("with PyTorch's allocated and reserved peaks, takes the activations from allocated and the slack from reserved", () => {
    const anchor = lstm[2]!;
    const r = reanchor(anchor.footprint, anchor.setup, k, {
      micro_batch: anchor.micro_batch,
      peak_bytes: anchor.measured,
      allocated_bytes: anchor.allocated,
      reserved_bytes: anchor.reserved,
    });
    expect(r.on).toBe("allocated");
    const next = lstm[3]!;
    expect(Math.abs(r.peakAt(next.micro_batch) / next.measured - 1)).toBeLessThan(0.05);
  });
});

describe("the recorded H100 pairs (bench/results/gpu/nvidia-h100-80gb-hbm3)", () => {
  const spec = pairsFromRecords(records, "spec", load);
  const profile = pairsFromRecords(records, "profile", load);
  // the script path: each job's fp32 `brim plan -- <command>` profile (bench/plan-script-h100.bench.mjs)
  const scriptPlans = (
    JSON.parse(readFileSync(join(root, "bench/results/plan-script-h100.json"), "utf8")) as { plans: { job: string; precision: string; profile?: unknown }[] }
  ).plans;
  const script = pairsFromRecords(records, "script", load, {
    scriptProfiles: Object.fromEntries(scriptPlans.filter((p) => p.precision === "fp32" && p.profile !== undefined).map((p) => [p.job, p.profile])),
  });

  it("turns every spec record into a pair, and leaves out the lstm, which has no profile (oneDNN failed under PyTorch 2.11)", () => {
    expect(spec.pairs).toHaveLength(60);
    expect(spec.skipped).toEqual({});
    expect(profile.pairs).toHaveLength(48);
    expect(profile.skipped).toEqual({ "no profile (the SDK could not profile this job)": 12 });
    // every job has a script plan, the lstm too (its CPU run is in fp32; cuDNN's layout is modelled)
    expect(script.pairs).toHaveLength(60);
  });

  it("names the job a term of its own keeps out of leave-one-job-out: the cnn-lstm, the only job with a convolution", () => {
    expect(ownTerms(script.pairs)).toEqual(
      new Map([
        ["cnn-lstm", ["conv"]],
        ["embedder", []],
        ["lstm", []],
        ["nbeats", []],
        ["ppo", []],
      ]),
    );
    for (const [source, pairs] of [
      ["spec", spec.pairs],
      ["script", script.pairs],
    ] as const) {
      const [kept, ...more] = keptOut(pairs, source);
      expect(more, source).toEqual([]);
      expect(kept, source).toMatchObject({ source, job: "cnn-lstm", terms: ["the convolutions' cuDNN workspace"], pairs: 12 });
      // held out, its convolution workspace is fitted from nothing: the plan comes out under
      expect(kept!.worst_error!, source).toBeLessThan(-0.2);
      const [, all, rest] = validate(pairs, source);
      expect(rest).toMatchObject({ mode: "leave-one-job-out, jobs with no term of their own", pairs: 48 });
      expect(all!.pairs - rest!.pairs).toBe(kept!.pairs);
      expect(rest!.median_abs_error!).toBeLessThan(all!.median_abs_error!);
    }
    // the SDK's profile models no cuDNN workspace (its cnn-lstm has neither term): nothing is kept out there
    expect(keptOut(profile.pairs, "profile")).toEqual([]);
  });

  it("the shipped calibration is what the fit makes from these pairs, and the committed fit file says so", () => {
    const fitted = fitConstants(spec.pairs)!;
    const shipped = CALIBRATIONS.find((c) => c.source === "bench/results/gpu/nvidia-h100-80gb-hbm3/calibration.json")!;
    const file = JSON.parse(readFileSync(join(results, "calibration.json"), "utf8")) as {
      fit: { constants: Record<string, number> };
      measured_on: Record<string, string>;
      inputs: string[];
      command: string;
    };
    for (const [name, value] of Object.entries(fitted)) {
      expect(shipped.constants[name as keyof typeof fitted], name).toBeCloseTo(value, 3);
      expect(file.fit.constants[name], name).toBeCloseTo(value, 3);
    }
    expect(shipped.measured_on).toMatchObject({ gpu: file.measured_on.gpu, driver: file.measured_on.driver, torch: file.measured_on.torch });
    expect(file.inputs).toEqual(["bench/results/gpu/nvidia-h100-80gb-hbm3/plan-accuracy.jsonl"]);
    expect(file.command).toContain("bench/gpu/fit-constants.mjs");
  });

  it("the calibration makes the plan better than the defaults on every job", () => {
    const k = CALIBRATIONS[0]!.constants;
    for (const job of new Set(spec.pairs.map((p) => p.job))) {
      const mine = spec.pairs.filter((p) => p.job === job);
      expect(accuracy(errorsOf(mine, k)).median_abs_error!, job).toBeLessThan(accuracy(errorsOf(mine, {})).median_abs_error!);
    }
  });

  it("accuracy has not regressed below the committed plan-validation.json", () => {
    const committed = JSON.parse(readFileSync(join(results, "plan-validation.json"), "utf8")) as {
      schema: string;
      results: ValidationResult[];
      one_trial: (ValidationResult & { mode: string })[];
    };
    expect(committed.schema).toBe("brim.plan-validation/v1");
    const now = [...validate(spec.pairs, "spec"), ...validate(profile.pairs, "profile"), ...validate(script.pairs, "script")];
    const trial = [
      { source: "spec", ...accuracy(oneTrialErrors(spec.pairs)) },
      { source: "profile", ...accuracy(oneTrialErrors(profile.pairs)) },
      { source: "script", ...accuracy(oneTrialErrors(script.pairs)) },
    ];
    expect(committed.results.map((r) => r.source)).toContain("script");
    const check = (
      was: ValidationResult,
      is: { pairs: number; median_abs_error: number | null; worst_abs_error: number | null; under_3pct_share: number | null },
    ): void => {
      const what = `${was.source} ${was.mode}`;
      expect(is.pairs, what).toBe(was.pairs);
      expect(is.median_abs_error!, what).toBeLessThanOrEqual(was.median_abs_error! + 1e-3);
      expect(is.worst_abs_error!, what).toBeLessThanOrEqual(was.worst_abs_error! + 1e-3);
      expect(is.under_3pct_share!, what).toBeLessThanOrEqual(was.under_3pct_share! + 1e-9);
    };
    for (const was of committed.results)
      check(
        was,
        now.find((r) => r.source === was.source && r.mode === was.mode)!,
      );
    for (const was of committed.one_trial)
      check(
        was,
        trial.find((r) => r.source === was.source)!,
      );
  });
});

describe("plans say which constants are calibrated, for which GPU and framework", () => {
  const model = load("examples/nbeats/model.yaml");

  it("a Hopper plan uses the H100 calibration and names the rest as defaults", () => {
    for (const gpu of ["h100-sxm", "h100-pcie", "h200"]) {
      const report = plan(model, { gpu });
      expect(report.calibration?.id, gpu).toBe("hopper-torch2");
      expect(report.calibration?.measured_on.gpu).toBe("NVIDIA H100 80GB HBM3");
      expect(report.calibration?.calibrated).toContain("cuda_context_bytes");
      expect(report.calibration?.defaults).toContain("peak_efficiency");
      const context = report.assumptions.find((a) => a.name === "cuda_context_bytes")!;
      expect(context).toMatchObject({ calibrated: true, value: CALIBRATIONS[0]!.constants.cuda_context_bytes });
      expect(context.source).toContain("driver 580.159.04");
    }
  });

  it("another architecture, or PyTorch 1, gets the defaults and says so", () => {
    expect(plan(model, { gpu: "t4" }).calibration).toBeNull();
    expect(plan(model, { gpu: "t4" }).assumptions.find((a) => a.name === "cuda_context_bytes")?.calibrated).toBe(false);
    expect(resolveConstants("h100-sxm", CALIBRATIONS, "hopper", 1).calibration).toBeNull();
  });
});
