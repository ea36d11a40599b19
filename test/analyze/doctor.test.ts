import { describe, expect, it } from "vitest";
import { CHECKS, diagnose, type CheckId, type DoctorReport, type Finding } from "../../src/analyze/doctor/index.ts";
import { gpuFacts } from "../../src/analyze/gpu.ts";
import { measureRun } from "../../src/analyze/measure.ts";
import { readTimeline } from "../../src/record/timeline.ts";
import { shellQuote, tuneCommandLine } from "../../src/analyze/tune-hint.ts";
import * as T from "../../src/analyze/thresholds.ts";
import { GIB, syntheticRun, type SyntheticOptions } from "./synthetic.ts";

function doctor(o: SyntheticOptions): DoctorReport {
  const { meta, timeline } = syntheticRun(o);
  return diagnose(meta, timeline);
}

function get(report: DoctorReport, id: CheckId): Finding {
  const f = report.findings.find((x) => x.id === id);
  if (f === undefined) throw new Error(`expected finding ${id}; got ${report.findings.map((x) => x.id).join(", ")}; passed ${JSON.stringify(report.passed)}; not evaluated ${JSON.stringify(report.not_evaluated)}`);
  return f;
}

function fired(report: DoctorReport): CheckId[] {
  return report.findings.map((f) => f.id);
}

/** A well-fed GPU run: bf16 on an A100, short waits, 60 of 80 GiB used, no throttling. */
const HEALTHY: SyntheticOptions = { treeGpuBytes: 60 * GIB, reserved: 55 * GIB, allocated: 50 * GIB, utilWait: 97, utilCompute: 99, sm: 85 };

describe("brim doctor on synthetic runs", () => {
  it("finds nothing wrong in a healthy GPU run, and accounts for every check", () => {
    const r = doctor(HEALTHY);
    expect(fired(r)).toEqual([]);
    const accounted = [...r.findings.map((f) => f.id), ...r.passed.map((p) => p.check), ...r.not_evaluated.map((n) => n.check)];
    expect(new Set(accounted)).toEqual(new Set(CHECKS.filter((c) => c !== "cpu_run")));
    expect(r.not_evaluated.map((n) => n.check)).toEqual(["pcie_traffic"]);
    expect(r.passed.find((p) => p.check === "data_starved")?.why).toMatch(/data wait is 4\.8 % of step time/);
  });

  describe("data starvation", () => {
    const starved: SyntheticOptions = { ...HEALTHY, wait: () => 0.5, compute: () => 0.3, utilWait: 2, utilCompute: 96, workers: 0, treeCpu: 99, cpus: 16 };

    it("fires with the wait share, GPU idle aligned with the waits, and the loader's CPU", () => {
      const f = get(doctor(starved), "data_starved");
      expect(f.severity).toBe("high");
      expect(f.confidence.level).toBe("high");
      const share = f.evidence.find((e) => e.label === "data wait share");
      expect(share?.value).toBeCloseTo(0.5 / 0.8, 6);
      const aligned = f.evidence.find((e) => e.label === "GPU utilization while waiting");
      expect(aligned?.value).toBeCloseTo(2, 6);
      expect(aligned?.text).toMatch(/96 % while it computed/);
      expect(f.evidence.find((e) => e.label === "CPU of the job's processes")?.text).toMatch(/0 loader workers: 99 % per loading process, saturated/);
      expect(f.fix.steps[0]).toMatch(/num_workers=2, persistent_workers=True, prefetch_factor=4/);
      expect(f.fix.steps.join(" ")).toMatch(/pin_memory=True/);
      expect(f.verify).toBe("brim tune --knob num_workers=0,2,4,8 --knob pin_memory=false,true -- python train.py --config config.yaml");
    });

    it("asks for more workers when the workers are saturated, and not when the host has no core to spare", () => {
      const saturated = get(doctor({ ...starved, workers: 4, treeCpu: 480 }), "data_starved");
      expect(saturated.fix.steps[0]).toMatch(/The 4 workers are saturated: raise num_workers to 8/);
      expect(saturated.knobs[0]).toEqual({ name: "num_workers", values: [4, 8] });
      const host = get(doctor({ ...starved, workers: 8, treeCpu: 1500, hostCpu: 97 }), "data_starved");
      expect(host.fix.steps[0]).toMatch(/The job already keeps 94 % of the host's 16 cores busy: more loader workers cannot help/);
      expect(host.knobs.map((k) => k.name)).not.toContain("num_workers");
      expect(host.fix.steps.join(" ")).toMatch(/Cache decoded/);
    });

    it("still offers workers when the host is busy with other work, with the caveat", () => {
      const f = get(doctor({ ...starved, hostCpu: 100, treeCpu: 45, cpus: 2 }), "data_starved");
      expect(f.fix.steps[0]).toMatch(/^Load batches in worker processes/);
      expect(f.evidence.find((e) => e.label === "host CPU")?.text).toMatch(/mostly by other work: workers will share the cores with it/);
      expect(f.knobs[0]).toEqual({ name: "num_workers", values: [0, 2] });
    });

    it("reads idle workers as waiting on file reads", () => {
      const f = get(doctor({ ...starved, workers: 4, treeCpu: 150 }), "data_starved");
      expect(f.fix.steps[0]).toMatch(/The 4 workers are not CPU-bound \(30 % each\): they wait on reading files\. Raise num_workers to 8/);
    });

    it("offers the job's own GPU augmentation knob when the job has one", () => {
      const f = get(doctor({ ...starved, knobsRead: { gpu_augment: false } }), "data_starved");
      expect(f.fix.steps.join(" ")).toMatch(/knob gpu_augment: set it to true/);
      expect(f.verify).toContain("--knob gpu_augment=false,true");
    });

    it("is medium below the severe share and silent below the threshold", () => {
      expect(get(doctor({ ...HEALTHY, wait: () => 0.04, compute: () => 0.2 }), "data_starved").severity).toBe("medium");
      const r = doctor({ ...HEALTHY, wait: () => 0.01, compute: () => 0.2 });
      expect(fired(r)).not.toContain("data_starved");
    });

    it("is not evaluated without step reports", () => {
      const r = doctor({ ...HEALTHY, steps: 0 });
      expect(r.not_evaluated.find((n) => n.check === "data_starved")?.reason).toMatch(/brim\.track/);
      expect(r.notes.join(" ")).toMatch(/reported no steps/);
    });

    it("is only a hint on a handful of steps", () => {
      expect(get(doctor({ ...starved, steps: 5, warmup: 1 }), "data_starved").confidence.level).toBe("low");
    });
  });

  describe("launch-bound steps", () => {
    it("fires on high utilization with low SM activity, and suggests bigger micro-batches and CUDA graphs", () => {
      const f = get(doctor({ ...HEALTHY, treeGpuBytes: 10 * GIB, reserved: 8 * GIB, utilWait: 96, utilCompute: 96, sm: 22 }), "launch_bound");
      expect(f.confidence.level).toBe("high");
      expect(f.evidence.map((e) => e.label)).toEqual(["GPU utilization", "SM activity", "micro-batch"]);
      expect(f.fix.steps.join(" ")).toMatch(/CUDA graph.*reduce-overhead/);
      expect(f.knobs[0]?.name).toBe("batch_size");
      expect(f.knobs[0]?.values[0]).toBe(32);
      expect(f.verify).toBe("brim tune --knob batch_size=32,64,128 -- python train.py --config config.yaml");
    });

    it("judges very short steps without SM activity, with lower confidence", () => {
      const f = get(doctor({ ...HEALTHY, sm: null, wait: () => 0.0002, compute: () => 0.004, steps: 200 }), "launch_bound");
      expect(f.confidence.level).toBe("medium");
      expect(f.confidence.reason).toMatch(/SM activity \(GPM, Hopper and newer\) was not recorded/);
    });

    it("stays silent when the SMs are busy", () => {
      expect(fired(doctor({ ...HEALTHY, sm: 75 }))).not.toContain("launch_bound");
    });
  });

  describe("unused memory", () => {
    it("fires when the peak is far under the card, with a conservative micro-batch", () => {
      const f = get(doctor({ ...HEALTHY, treeGpuBytes: 10 * GIB, reserved: 8 * GIB }), "memory_unused");
      expect(f.evidence.find((e) => e.label === "share used")?.value).toBeCloseTo(10 / 80, 6);
      // 32 × 80 GiB × 0.9 / 10 GiB = 230
      expect(f.fix.steps[0]).toMatch(/from 32 toward 230/);
      expect(f.knobs).toEqual([{ name: "batch_size", values: [32, 64, 128] }]);
    });

    it("trades accumulation for micro-batch when the job accumulates", () => {
      const f = get(doctor({ ...HEALTHY, treeGpuBytes: 10 * GIB, reserved: 8 * GIB, accumulation: 8 }), "memory_unused");
      // 230 fit by the conservative estimate: ×4 is the largest power of two that also divides accumulation 8
      expect(f.fix.steps[0]).toMatch(/from 32 to 128 and lower accumulation from 8 to 2: the same effective batch \(256\)/);
      expect(f.knobs.map((k) => k.name)).toEqual(["batch_size", "accumulation"]);
    });

    it("measures against the cap when there is one", () => {
      const r = doctor({ ...HEALTHY, treeGpuBytes: 10 * GIB, reserved: 8 * GIB, cap: 16 * GIB });
      expect(fired(r)).not.toContain("memory_unused");
      expect(r.passed.find((p) => p.check === "memory_unused")?.why).toMatch(/62\.5 % of the cap/);
    });

    it("stays silent after out-of-memory recoveries", () => {
      const r = doctor({ ...HEALTHY, treeGpuBytes: 10 * GIB, events: [{ step: 5, event: "oom_recovered", details: { batch: 32, split: 2, micro_batch: 16, accumulation: 2 } }] });
      expect(fired(r)).not.toContain("memory_unused");
      const oom = get(r, "oom_recovered");
      expect(oom.fix.steps[0]).toMatch(/Set the micro-batch to 16 and multiply accumulation by 2/);
    });
  });

  describe("precision", () => {
    it("flags fp32 on an A100 and proposes bf16-mixed", () => {
      const f = get(doctor({ ...HEALTHY, precision: "fp32" }), "fp32_on_tensor_cores");
      expect(f.severity).toBe("high");
      expect(f.confidence.level).toBe("high");
      expect(f.fix.summary).toBe("switch to bf16-mixed");
      expect(f.knobs).toEqual([{ name: "precision", values: ["fp32", "tf32", "bf16-mixed"] }]);
    });

    it("proposes fp16-mixed on a T4 (no fast bf16), and nothing on a card without tensor cores", () => {
      expect(get(doctor({ ...HEALTHY, precision: "fp32", gpu: { name: "Tesla T4", total_bytes: 15 * GIB }, treeGpuBytes: 12 * GIB }), "fp32_on_tensor_cores").fix.summary).toBe("switch to fp16-mixed");
      const pascal = doctor({ ...HEALTHY, precision: "fp32", gpu: { name: "NVIDIA GeForce GTX 1080 Ti", total_bytes: 11 * GIB }, treeGpuBytes: 9 * GIB });
      expect(pascal.passed.find((p) => p.check === "fp32_on_tensor_cores")?.why).toMatch(/no tensor cores/);
    });

    it("uses the run's knobs when the job did not report reading its precision, and says when it cannot tell", () => {
      const fromKnobs = get(doctor({ ...HEALTHY, precision: null, knobs: { precision: "fp32" } }), "fp32_on_tensor_cores");
      expect(fromKnobs.confidence.level).toBe("medium");
      const unknown = doctor({ ...HEALTHY, precision: null });
      expect(unknown.not_evaluated.find((n) => n.check === "fp32_on_tensor_cores")?.reason).toMatch(/did not report its precision/);
    });

    it("flags non-finite fp16 losses and the fallback, proposing bf16 where the card has it", () => {
      const events = [
        ...[10, 11, 12].map((step, i) => ({ step, event: "nonfinite_loss", details: { precision: "fp16-mixed", count: i + 1 } })),
        { step: 12, event: "precision_fallback", message: "fp16-mixed losses were non-finite 3 times in a row; continuing in fp32", details: { from: "fp16-mixed", to: "fp32", reason: "nonfinite_loss", count: 3 } },
      ];
      const r = doctor({ ...HEALTHY, precision: "fp16-mixed", events });
      const f = get(r, "nonfinite_loss");
      expect(f.severity).toBe("high");
      expect(f.evidence[0]?.text).toMatch(/3 steps with a NaN\/inf loss under fp16-mixed \(first at step 10\)/);
      expect(f.fix.steps[0]).toMatch(/bf16-mixed/);
      expect(f.knobs).toEqual([{ name: "precision", values: ["fp16-mixed", "bf16-mixed", "fp32"] }]);
      expect(measureRun(syntheticRun({ ...HEALTHY, precision: "fp16-mixed", events }).meta, readTimeline(syntheticRun({ ...HEALTHY, precision: "fp16-mixed", events }).timeline)).precision).toBe("fp32");
      const t4 = get(doctor({ ...HEALTHY, precision: "fp16-mixed", gpu: { name: "Tesla T4", total_bytes: 15 * GIB }, treeGpuBytes: 12 * GIB, events }), "nonfinite_loss");
      expect(t4.fix.steps[0]).toMatch(/no fast bf16/);
      expect(fired(doctor(HEALTHY))).not.toContain("nonfinite_loss");
    });
  });

  describe("PCIe, clocks and GPU contexts", () => {
    it("flags heavy host-to-device traffic from the PCIe counters", () => {
      const f = get(doctor({ ...HEALTHY, pcieRxKBs: 6e6 }), "pcie_traffic");
      expect(f.evidence[0]?.value).toBeCloseTo(6e6 * 1024, 0);
      expect(f.fix.steps[0]).toMatch(/pin_memory=True.*non_blocking=True/);
      expect(fired(doctor({ ...HEALTHY, pcieRxKBs: 1e5 }))).not.toContain("pcie_traffic");
    });

    it("flags clocks held back by power with the share of time and the cost", () => {
      const f = get(doctor({ ...HEALTHY, throttle: (i) => (i % 2 === 0 ? ["sw_power_cap"] : []) }), "clocks_held_back");
      const share = f.evidence.find((e) => e.label === "time held back")?.value as number;
      expect(share).toBeGreaterThan(0.4);
      expect(share).toBeLessThan(0.6);
      const cost = f.evidence.find((e) => e.label === "estimated cost")?.value as number;
      expect(cost).toBeCloseTo(share * (1 - 1200 / 1410), 6);
      expect(f.fix.steps[0]).toMatch(/nvidia-smi -pl/);
      expect(f.verify).toBeNull();
      expect(fired(doctor({ ...HEALTHY, throttle: () => ["gpu_idle"] }))).not.toContain("clocks_held_back");
      expect(doctor({ ...HEALTHY, throttle: () => null }).not_evaluated.map((n) => n.check)).toContain("clocks_held_back");
    });

    it("flags many processes each holding a GPU context, and JAX preallocating", () => {
      const many = get(doctor({ ...HEALTHY, treeGpuBytes: 30 * GIB, reserved: 8 * GIB, gpuPids: 9 }), "gpu_contexts");
      expect(many.title).toBe("Many processes each hold a GPU context");
      expect(many.confidence.level).toBe("high");
      expect(many.evidence.find((e) => e.label === "outside the main allocator")?.value).toBe(22 * GIB);
      expect(many.fix.steps.join(" ")).toMatch(/CUDA_VISIBLE_DEVICES=/);
      const jax = get(doctor({ ...HEALTHY, jax: true, treeGpuBytes: 64 * GIB, earlyGpuBytes: 61 * GIB, reserved: 4 * GIB }), "gpu_contexts");
      expect(jax.title).toBe("A framework preallocates GPU memory");
      expect(jax.fix.steps[0]).toMatch(/XLA_PYTHON_CLIENT_PREALLOCATE=false/);
      expect(fired(doctor({ ...HEALTHY, gpuPids: 1 }))).not.toContain("gpu_contexts");
    });

    it("counts processes from the GPU's list when the tree's count is missing, less surely", () => {
      const f = get(doctor({ ...HEALTHY, treeGpuBytes: 30 * GIB, reserved: 8 * GIB, gpuProcesses: 6 }), "gpu_contexts");
      expect(f.confidence.level).toBe("medium");
      expect(f.confidence.reason).toMatch(/may include processes outside the job/);
    });
  });

  describe("why utilization is not 100 %", () => {
    it("splits the idle points into data wait and gaps inside steps", () => {
      const r = doctor({ ...HEALTHY, wait: () => 0.5, compute: () => 0.3, utilWait: 0, utilCompute: 80 });
      const f = get(r, "utilization_gap");
      expect(f.severity).toBe("info");
      const u = r.measures.gpu_util_mean as number;
      const parts = f.evidence.filter((e) => ["waiting for data", "between steps", "inside steps"].includes(e.label)).map((e) => e.value as number);
      expect(parts.reduce((a, b) => a + b, 0)).toBeCloseTo(100 - u, 6);
      expect(f.summary).toMatch(/^The GPU ran kernels \d+ % of the time\. Of the \d+ points it sat idle, about \d+ to waiting for the next batch and \d+ to gaps inside the steps/);
    });

    it("turns into advice when the GPU mostly waits for the host inside the steps", () => {
      const f = get(doctor({ ...HEALTHY, utilWait: 35, utilCompute: 35, sm: null, treeGpuBytes: 10 * GIB, reserved: 8 * GIB }), "utilization_gap");
      expect(f.severity).toBe("medium");
      expect(f.fix.steps[0]).toMatch(/loss\.item\(\)/);
      expect(f.verify).toMatch(/--knob batch_size=32,64,128/);
      expect(get(doctor({ ...HEALTHY, utilWait: 85, utilCompute: 85 }), "utilization_gap").severity).toBe("info");
    });

    it("adds the SM activity caveat in plain words", () => {
      const f = get(doctor({ ...HEALTHY, utilWait: 96, utilCompute: 96, sm: 20, treeGpuBytes: 50 * GIB }), "utilization_gap");
      expect(f.summary).toMatch(/SM activity was 20 %, so most of the card sat idle even then/);
    });
  });

  describe("CPU runs", () => {
    it("says what can be said and which GPU checks could not be evaluated", () => {
      const r = doctor({ gpu: null, wait: () => 0.3, compute: () => 0.2, workers: 0, treeCpu: 190, cpus: 2, rss: 3 * GIB, precision: "fp32" });
      expect(fired(r)).toEqual(["data_starved", "cpu_run"]);
      const cpu = get(r, "cpu_run");
      expect(cpu.evidence.map((e) => e.label)).toEqual(["data wait share", "throughput", "CPU of the job's processes", "peak RSS"]);
      expect(cpu.evidence[2]?.text).toMatch(/1\.9 of 2 cores/);
      expect(r.not_evaluated.map((n) => n.check).sort()).toEqual(["clocks_held_back", "fp32_on_tensor_cores", "gpu_contexts", "launch_bound", "memory_unused", "pcie_traffic", "utilization_gap"]);
      expect(r.not_evaluated.every((n) => /CPU run/.test(n.reason))).toBe(true);
      expect(r.run.device).toBe("CPU (2 cores)");
    });
  });

  it("notes a run that has not ended", () => {
    expect(doctor({ ...HEALTHY, running: true }).notes.join(" ")).toMatch(/has not ended/);
  });

  it("documents every threshold in docs/doctor.md", async () => {
    const { readFile } = await import("node:fs/promises");
    const doc = await readFile(new URL("../../docs/doctor.md", import.meta.url), "utf8");
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
      duration_s: 10, steps: 40, steady_steps: 38, samples: 1216, samples_per_s: 1234, throughput_source: "sdk", data_wait_share: 0.05, step_time_s: 0.21,
      peak_tree_gpu_bytes: 79 * GIB, peak_tree_rss_bytes: null, framework_peak_allocated_bytes: null, framework_peak_reserved_bytes: null,
      gpu_util_mean: null, sm_activity_mean: null, power_mean_w: null, energy_j: null, energy_j_per_sample: null, oom_recoveries: 0, micro_batch: 32, accumulation: 1,
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
    expect(tuneCommandLine(["python", "train.py", "--set", "a b"], [{ name: "precision", values: ["fp32", "bf16-mixed"] }])).toBe("brim tune --knob precision=fp32,bf16-mixed -- python train.py --set 'a b'");
  });
});
