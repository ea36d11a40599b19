import { describe, expect, it } from "vitest";
import * as T from "../../../src/analyze/thresholds.ts";
import { CHECKS } from "../../../src/analyze/doctor/index.ts";
import { gpuFacts } from "../../../src/analyze/gpu.ts";
import { measureRun } from "../../../src/analyze/measure.ts";
import { readTimeline } from "../../../src/record/timeline/index.ts";
import { shellQuote, tuneCommandLine } from "../../../src/analyze/tune-hint.ts";
import { GIB, syntheticRun } from "../synthetic.ts";
import { doctor, fired, HEALTHY } from "./helpers.ts";

describe("brim doctor on synthetic runs", () => {
  it("finds nothing wrong in a healthy GPU run, and accounts for every check", () => {
    const r = doctor(HEALTHY);
    expect(fired(r)).toEqual([]);
    const accounted = [...r.findings.map((f) => f.id), ...r.passed.map((p) => p.check), ...r.not_evaluated.map((n) => n.check)];
    expect(new Set(accounted)).toEqual(new Set(CHECKS.filter((c) => c !== "cpu_run")));
    expect(r.not_evaluated.map((n) => n.check)).toEqual(["pcie_traffic"]);
    expect(r.passed.find((p) => p.check === "data_starved")?.why).toMatch(/data wait is 4\.8 % of step time/);
  });

  it("notes a run that has not ended", () => {
    expect(doctor({ ...HEALTHY, running: true }).notes.join(" ")).toMatch(/has not ended/);
  });

  it("documents every threshold in docs/doctor.md", async () => {
    const { readFile } = await import("node:fs/promises");
    const doc = await readFile(new URL("../../../docs/doctor.md", import.meta.url), "utf8");
    for (const name of Object.keys(T)) expect(doc, name).toContain(`\`${name}\``);
  });
});

describe("measurements", () => {
  it("follows DESIGN.md's definitions over steady steps of the main process", () => {
    const { meta, timeline } = syntheticRun({ ...HEALTHY, steps: 10, warmup: 2, batch: 16, wait: (i) => 0.1 * (i + 1), compute: () => 0.4 });
    const m = measureRun(meta, readTimeline(timeline));
    const steady = [2, 3, 4, 5, 6, 7, 8, 9].map((i) => ({ wait: 0.1 * (i + 1), compute: 0.4 }));
    const busy = steady.reduce((a, s) => a + s.wait + s.compute, 0);
    expect(m.steady_steps).toBe(8);
    expect(m.samples_per_s).toBeCloseTo((8 * 16) / busy, 9);
    expect(m.data_wait_share).toBeCloseTo(steady.reduce((a, s) => a + s.wait, 0) / busy, 9);
    expect(m.step_time_s).toBeCloseTo((0.6 + 0.7) / 2 + 0.4, 9);
    expect(m.precision).toBe("bf16-mixed");
    expect(m.precision_source).toBe("knob_read");
    expect(m.gpu?.architecture).toBe("ampere");
    expect(m.memory_limit_source).toBe("gpu_total");
  });

  it("takes from run.json only what the timeline cannot give: the guard's peaks and the job's wall time", () => {
    const { meta, timeline } = syntheticRun(HEALTHY);
    const fromTimeline = measureRun(meta, readTimeline(timeline));
    meta.summary = {
      duration_s: 10,
      steps: 40,
      steady_steps: 38,
      samples: 1280,
      steady_samples: 1216,
      samples_per_s: 1234,
      throughput_source: "sdk",
      data_wait_share: 0.05,
      step_time_s: 0.21,
      peak_tree_gpu_bytes: 79 * GIB,
      peak_tree_rss_bytes: null,
      framework_peak_allocated_bytes: null,
      framework_peak_reserved_bytes: null,
      gpu_util_mean: null,
      sm_activity_mean: null,
      power_mean_w: null,
      energy_j: null,
      energy_j_per_sample: null,
      oom_recoveries: 0,
      micro_batch: 32,
      accumulation: 1,
      env_steps_per_s: null,
    };
    const m = measureRun(meta, readTimeline(timeline));
    expect(m.samples_per_s).toBe(fromTimeline.samples_per_s);
    expect(m.gpu_util_mean).toBeGreaterThan(90);
    expect(m.peak_tree_gpu_bytes).toBe(79 * GIB);
    expect(m.duration_s).toBe(10);
  });
});

describe("GPU facts and the tune hint", () => {
  it.each([
    ["NVIDIA H100 80GB HBM3", "hopper", true, true],
    ["Tesla V100-SXM2-16GB", "volta", true, false],
    ["NVIDIA GeForce GTX 1660 SUPER", "turing", false, false],
    ["NVIDIA GeForce RTX 3090", "ampere", true, true],
    ["Some Future Card", null, null, null],
  ])("%s", (name, arch, tensor, bf16) => {
    const f = gpuFacts(name, null);
    expect([f.architecture, f.tensor_cores, f.bf16]).toEqual([arch, tensor, bf16]);
  });

  it("quotes the command for a shell", () => {
    expect(shellQuote("it's")).toBe(`'it'\\''s'`);
    expect(tuneCommandLine(["python", "train.py", "--set", "a b"], [{ name: "precision", values: ["fp32", "bf16-mixed"] }])).toBe(
      "brim tune --knob precision=fp32,bf16-mixed -- python train.py --set 'a b'",
    );
  });
});

describe("the list of checks", () => {
  it("names each check once, in the order of CHECKS, each in a file of its own with a test of its own", async () => {
    const { CHECK_FUNCTIONS } = await import("../../../src/analyze/doctor/index.ts");
    const { readdirSync } = await import("node:fs");
    expect(CHECK_FUNCTIONS.map((c) => c.id)).toEqual([...CHECKS]);
    const files = (dir: string): string[] => readdirSync(new URL(dir, import.meta.url)).map((f) => f.replace(/\.test\.ts$|\.ts$/, ""));
    const sources = files("../../../src/analyze/doctor/");
    const tests = files("./");
    for (const id of CHECKS) {
      const name = id.replace(/_/g, "-");
      expect(sources, id).toContain(name);
      expect(tests, id).toContain(name);
    }
  });
});
