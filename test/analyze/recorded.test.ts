/**
 * brim doctor on runs recorded for real by `brim run` (test/fixtures/stores, see README.md there):
 * the cnn-lstm example on the CPU with loading in the training process and with 2 workers, and
 * nbeats with an injected out-of-memory error and fp16-mixed asked for on a CPU.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { diagnose, type DoctorReport } from "../../src/analyze/doctor/index.ts";
import { measureRun } from "../../src/analyze/measure.ts";
import { readTimeline } from "../../src/record/timeline/index.ts";
import { main } from "../../src/cli/main.ts";
import { RunStore } from "../../src/record/store.ts";
import type { RunMeta, TimelineEntry } from "../../src/record/types.ts";

const STORES = fileURLToPath(new URL("../fixtures/stores/", import.meta.url));

async function loadRuns(store: string): Promise<{ meta: RunMeta; timeline: TimelineEntry[] }[]> {
  const s = new RunStore(`${STORES}${store}`);
  return Promise.all((await s.runIds()).map((id) => s.readRun(id)));
}

async function cnnLstm(workers: 0 | 2): Promise<{ meta: RunMeta; timeline: TimelineEntry[] }> {
  const run = (await loadRuns("cnn-lstm")).find((r) => r.meta.command.includes(`data_loader.num_workers=${workers}`));
  if (run === undefined) throw new Error(`no cnn-lstm run with ${workers} workers in the fixture store`);
  return run;
}

function ids(r: DoctorReport): string[] {
  return r.findings.map((f) => f.id);
}

describe("brim doctor on recorded runs", () => {
  it("finds the 0-worker cnn-lstm run starved by data and proposes workers", async () => {
    const { meta, timeline } = await cnnLstm(0);
    const r = diagnose(meta, timeline);
    expect(ids(r)).toEqual(["data_starved", "cpu_run"]);
    const f = r.findings[0];
    expect(f?.severity).toBe("high");
    expect(f?.confidence.level).toBe("high");
    expect(r.measures.num_workers).toBe(0);
    expect(f?.fix.steps[0]).toMatch(/^Load batches in worker processes: DataLoader\(num_workers=2/);
    expect(f?.verify).toMatch(/^brim tune --knob num_workers=0,2 --knob gpu_augment=false,true -- \/usr\/bin\/python3 examples\/cnn-lstm\/train\.py /);
    expect(r.measures.data_wait_share).toBeGreaterThan(0.3);
  });

  it("does not find the 2-worker run starved, and says why", async () => {
    const { meta, timeline } = await cnnLstm(2);
    const r = diagnose(meta, timeline);
    expect(ids(r)).toEqual(["cpu_run"]);
    expect(r.measures.num_workers).toBe(2);
    expect(r.passed.find((p) => p.check === "data_starved")?.why).toMatch(/data wait is \d+\.\d % of step time \(below 10\.0 %\)/);
  });

  it("names the GPU checks a CPU run could not evaluate", async () => {
    const { meta, timeline } = await cnnLstm(0);
    const r = diagnose(meta, timeline);
    expect(r.not_evaluated.map((n) => n.check).sort()).toEqual([
      "clocks_held_back",
      "fp32_on_tensor_cores",
      "gpu_contexts",
      "launch_bound",
      "memory_unused",
      "pcie_traffic",
      "utilization_gap",
    ]);
    expect(r.findings.find((f) => f.id === "cpu_run")?.evidence.map((e) => e.label)).toEqual([
      "data wait share",
      "throughput",
      "CPU of the job's processes",
      "peak RSS",
    ]);
  });

  it("reports the real out-of-memory recovery and the precision fallback of the nbeats run", async () => {
    const [run] = await loadRuns("nbeats");
    if (run === undefined) throw new Error("no nbeats fixture");
    const r = diagnose(run.meta, run.timeline);
    expect(ids(r)).toEqual(["oom_recovered", "nonfinite_loss", "cpu_run"]);
    expect(r.findings[0]?.fix.steps[0]).toBe("Set the micro-batch to 16 and multiply accumulation by 2: the same effective batch with no failed attempts.");
    expect(r.findings[1]?.title).toBe("Precision not supported here");
    expect(r.measures.precision).toBe("fp32");
    expect(r.measures.precision_source).toBe("precision_fallback");
  });

  it("computes from the timeline the numbers brim run summarised", async () => {
    for (const run of [...(await loadRuns("cnn-lstm")), ...(await loadRuns("nbeats"))]) {
      const summary = run.meta.summary;
      expect(summary).not.toBeNull();
      const fromTimeline = measureRun({ ...run.meta, summary: null }, readTimeline(run.timeline));
      expect(fromTimeline.steady_steps).toBe(summary?.steady_steps);
      expect(fromTimeline.samples_per_s).toBeCloseTo(summary?.samples_per_s ?? NaN, 6);
      expect(fromTimeline.data_wait_share).toBeCloseTo(summary?.data_wait_share ?? NaN, 6);
      expect(fromTimeline.step_time_s).toBeCloseTo(summary?.step_time_s ?? NaN, 6);
      // The timeline keeps at most 2 readings a second of the sampler's 10: its peak is a lower bound.
      expect(fromTimeline.peak_tree_rss_bytes).toBeLessThanOrEqual(summary?.peak_tree_rss_bytes ?? NaN);
      expect(fromTimeline.peak_tree_rss_bytes).toBeGreaterThan(0.9 * (summary?.peak_tree_rss_bytes ?? NaN));
      expect(fromTimeline.micro_batch).toBe(summary?.micro_batch);
      expect(fromTimeline.accumulation).toBe(summary?.accumulation);
    }
  });

  it("speaks JSON and text from the command line", async () => {
    let stdout = "";
    const out = { stdout: (t: string) => void (stdout += t), stderr: (t: string) => void (stdout += t) };
    const { meta } = await cnnLstm(0);
    expect(await main(["doctor", meta.id.slice(-4), "--store", `${STORES}cnn-lstm`, "--json"], out)).toBe(0);
    const report = JSON.parse(stdout) as DoctorReport;
    expect(report.schema).toBe("brim.doctor/v1");
    expect(report.run.id).toBe(meta.id);
    stdout = "";
    expect(await main(["doctor", meta.id, "--store", `${STORES}cnn-lstm`], out)).toBe(0);
    expect(stdout).toMatch(/^brim doctor · run \d{8}-\d{6}-[0-9a-f]{4} · CPU \(\d+ cores\) · ended ok\n/);
    expect(stdout).toMatch(/1\. Starved by data {2}\[high severity · confidence high\]/);
    expect(stdout).toMatch(/ {3}verify: brim tune --knob num_workers=0,2/);
    stdout = "";
    expect(await main(["doctor", "ffff", "--store", `${STORES}cnn-lstm`], out)).toBe(2);
    expect(stdout).toMatch(/^brim: run 'ffff' not found/);
  });
});
