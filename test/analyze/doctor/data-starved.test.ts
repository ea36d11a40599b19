import { describe, expect, it } from "vitest";
import { type SyntheticOptions } from "../synthetic.ts";
import { doctor, fired, get, HEALTHY } from "./helpers.ts";

describe("doctor check: data-starved", () => {
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
    expect(r.not_evaluated.find((n) => n.check === "data_starved")?.reason).toBe("no step was counted (see the note above)");
    expect(r.notes.join(" ")).toMatch(/^No step was counted in the job's/);
  });
  it("is only a hint on a handful of steps", () => {
    expect(get(doctor({ ...starved, steps: 5, warmup: 1 }), "data_starved").confidence.level).toBe("low");
  });
});
