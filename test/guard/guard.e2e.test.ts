import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openDevices } from "../../src/devices/index.ts";
import { CapWatcher } from "../../src/guard/cap.ts";
import { guardRun } from "../../src/guard/guard.ts";
import { LiveTracker } from "../../src/guard/live.ts";
import { formatPrometheus } from "../../src/metrics/prometheus.ts";
import { renderLiveView, StatusFooter } from "../../src/metrics/view.ts";
import { RunStore } from "../../src/record/store.ts";
import type { RunMeta } from "../../src/record/types.ts";

const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-guard-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const MiB = 2 ** 20;

describe("CapWatcher", () => {
  it("asks to shrink near the cap, at most every few seconds, and stops only after readings in a row over it", () => {
    const watcher = new CapWatcher({ capBytes: 1000, scope: "ram", shrinkEveryS: 5 });
    expect(watcher.observe(500, 0, true).kind).toBe("none");
    expect(watcher.observe(950, 1, true).kind).toBe("shrink");
    expect(watcher.observe(950, 2, true).kind).toBe("none");
    expect(watcher.observe(950, 6.5, true).kind).toBe("shrink");
    expect(watcher.observe(950, 20, false).kind).toBe("none");
    expect(watcher.observe(1100, 21, false).kind).toBe("none");
    expect(watcher.observe(900, 22, false).kind).toBe("none");
    expect(watcher.observe(1100, 23, false).kind).toBe("none");
    const stop = watcher.observe(1200, 24, false);
    expect(stop.kind).toBe("stop");
    expect(stop.kind === "stop" && stop.detail).toMatch(/over the 0\.00 GiB cap/);
  });
});

describe("live state and its views", () => {
  const tracker = new LiveTracker({ startedAt: 100, capBytes: 8 * 2 ** 30, capScope: "gpu", totalSteps: 100 });
  tracker.message({ v: 1, type: "hello", t: 100, pid: 7, role: "main", rank: null });
  for (let step = 0; step < 10; step++) {
    tracker.message({
      v: 1,
      type: "step",
      t: 101 + step,
      pid: 7,
      step,
      samples: 64,
      wait_s: 0.1,
      compute_s: 0.4,
      warmup: step < 2,
      micro_batch: 64,
      accumulation: 2,
      loss: 0.5,
    });
  }
  tracker.message({ v: 1, type: "step", t: 120, pid: 99, step: 0, samples: 1000, wait_s: 0, compute_s: 0.001, warmup: false });
  tracker.reading({ t: 112, usedBytes: 6 * 2 ** 30, gpuUtil: 88, smActivity: 40, powerW: 250, cpuPercent: 110, processes: 3 });
  const state = tracker.snapshot(130);

  it("measures throughput and data wait over the main process's steady steps", () => {
    expect(state.steps).toBe(10);
    expect(state.samplesPerS).toBeCloseTo(128, 6);
    expect(state.waitShare).toBeCloseTo(0.2, 6);
    expect(state.etaS).toBeCloseTo(90 * 0.5, 6);
    expect(state.elapsedS).toBe(30);
  });

  it("renders the live view and the Prometheus text from the same state", () => {
    const view = renderLiveView(state, { color: false, width: 200 }).join("\n");
    expect(view).toContain("step 10/100");
    expect(view).toContain("128 samples/s");
    expect(view).toContain("6.00 GiB / 8.00 GiB GPU");
    expect(view).toContain("util 88%");
    expect(view).toContain("SM 40%");
    expect(view).toContain("data wait 20%");
    expect(view).toContain("micro-batch 64 × 2");
    const metrics = formatPrometheus(state, { run_id: "r1" });
    expect(metrics).toContain('brim_samples_per_second{run_id="r1"} 128');
    expect(metrics).toContain('brim_memory_cap_bytes{run_id="r1",scope="gpu"} 8589934592');
    expect(metrics).toMatch(/# TYPE brim_steps_total counter/);
  });

  it("keeps the view below the job's output on a terminal and prints plain lines elsewhere", () => {
    let screen = "";
    const footer = new StatusFooter({ write: (text) => (screen += text), isTTY: true, columns: 120 }, { color: false });
    footer.update(state, 1);
    footer.line("epoch 1");
    expect(screen).toContain("\u001b[");
    expect(screen.lastIndexOf("epoch 1")).toBeLessThan(screen.lastIndexOf("brim ▸"));
    let log = "";
    const plain = new StatusFooter({ write: (text) => (log += text), isTTY: false, columns: 80 }, { color: false, everyS: 10 });
    plain.update(state, 0);
    plain.update(state, 5);
    plain.update(state, 11);
    expect(log.split("\n").filter((line) => line.startsWith("brim: step"))).toHaveLength(2);
    expect(log).not.toContain("\u001b[");
  });
});

describe("guardRun with real processes (CPU mode)", () => {
  const devices = openDevices({ nvmlLibrary: "/nonexistent/libnvidia-ml.so.1", smiPath: null });
  const store = new RunStore(join(root, "store"));

  it("records the SDK's steps and events in the timeline and summarizes the run", async () => {
    const script = [
      "import time, brim",
      "brim.knob('batch_size', 8)",
      "for _ in brim.track(range(12), samples=brim.knob('batch_size', 8)):",
      "    time.sleep(0.02)",
      "brim.event('custom', 'hello from the job')",
    ].join("\n");
    const result = await guardRun(
      { command: [PYTHON, "-c", script], cwd: root, capBytes: null, knobs: { batch_size: 16 }, warmupSteps: 2, hz: 20 },
      { devices, store },
    );
    expect(result.meta.end?.cause).toBe("ok");
    const steps = result.timeline.steps;
    expect(steps).toHaveLength(12);
    expect(steps.every((step) => step.samples === 16)).toBe(true);
    expect(result.timeline.events.some((e) => e.event === "knob_read")).toBe(true);
    expect(result.timeline.events.some((e) => e.event === "custom")).toBe(true);
    expect(result.timeline.samples.length).toBeGreaterThan(0);
    expect(result.timeline.end?.cause).toBe("ok");
    const onDiskTimeline = readFileSync(join(store.runDir(result.meta.id), "timeline.ndjson"), "utf8")
      .trim()
      .split("\n");
    expect((JSON.parse(onDiskTimeline.at(-1) ?? "{}") as { kind?: string }).kind).toBe("end");
    expect(result.summary.steady_steps).toBe(10);
    expect(result.summary.steady_samples).toBe(160);
    expect(result.summary.samples).toBe(192);
    // 16 samples a step of at least 20 ms: never above 800 samples/s, however fast or busy the machine
    expect(result.summary.samples_per_s).toBeGreaterThan(0);
    expect(result.summary.samples_per_s).toBeLessThan(16 / 0.02);
    expect(result.summary.peak_tree_rss_bytes).toBeGreaterThan(MiB);
    const onDisk = JSON.parse(readFileSync(join(store.runDir(result.meta.id), "run.json"), "utf8")) as RunMeta;
    expect(onDisk.end?.cause).toBe("ok");
    expect(onDisk.knobs).toEqual({ batch_size: 16 });
    expect(onDisk.versions.sdk).toBeDefined();
    expect(onDisk.device.backend).toBe("cpu");
    expect(onDisk.cap_scope).toBe("ram");
  });

  it("asks the SDK to shrink near the cap: TrainStep splits the micro-batch and says so, the run goes on", async () => {
    const script = [
      "import torch, brim",
      "import brim.torch as bt",
      "model = torch.nn.Linear(16, 1)",
      "opt = torch.optim.SGD(model.parameters(), lr=0.01)",
      "step = bt.TrainStep(model, opt, lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1]))",
      "data = [(torch.randn(32, 16), torch.randn(32, 1)) for _ in range(60)]",
      "for batch in brim.track(data):",
      "    step(batch)",
      "    __import__('time').sleep(0.03)",
      "print('split', step.split, flush=True)",
    ].join("\n");
    // a shrink threshold at 1 % of a large cap: brim asks at the first reading with the SDK connected
    const result = await guardRun({ command: [PYTHON, "-c", script], cwd: root, capBytes: 8 * 2 ** 30, shrinkAt: 0.01, hz: 20 }, { devices, store });
    expect(result.meta.end?.cause).toBe("ok");
    const requested = result.timeline.events.filter((e) => e.event === "shrink_requested");
    const applied = result.timeline.events.filter((e) => e.event === "shrink_applied");
    expect(requested.length).toBeGreaterThan(0);
    expect(applied.length).toBeGreaterThan(0);
    expect((applied[0]?.details as { split_to?: number } | undefined)?.split_to).toBe(2);
    expect(result.job.tail.some((line) => /^split (2|4|8|16|32)$/.test(line))).toBe(true);
    expect(result.timeline.steps).toHaveLength(60);
  });

  it("stops a job whose RAM grows past the cap and says so", async () => {
    const script = [
      "import time",
      "held = []",
      "for i in range(400):",
      "    held.append(bytearray(8 << 20))",
      "    time.sleep(0.02)",
      "print('survived')",
    ].join("\n");
    const cap = 200 * MiB;
    const result = await guardRun({ command: [PYTHON, "-c", script], cwd: root, capBytes: cap, hz: 20, killGraceS: 2 }, { devices, store });
    expect(result.meta.end?.cause).toBe("cap_exceeded");
    expect(result.meta.end?.message).toMatch(/over the 0\.20 GiB cap; brim stopped it/);
    expect(result.job.tail).not.toContain("survived");
    expect(result.timeline.events.some((e) => e.event === "cap_stop")).toBe(true);
    // one reading period of growth (8 MiB per 20 ms at 20 Hz, two readings in a row) past the cap at most
    expect(result.summary.peak_tree_rss_bytes).toBeLessThan(cap + 64 * MiB);
  });
});
