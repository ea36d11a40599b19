/**
 * One timeline, every reader: the summary, the live view, doctor, the report and the dashboard's data
 * must state the same throughput, data wait, peak and GPU means — the definitions live in one module
 * (src/record/timeline/index.ts). The timeline has what made the old copies disagree: a step without wait
 * or compute time, several stepping processes, and GPUs the job does not use.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { diagnose } from "../../src/analyze/doctor/index.ts";
import { formatMaybeBytes, formatPercent, formatRate, formatShare } from "../../src/format.ts";
import { listRuns, liveCharts, runView } from "../../src/dashboard/data.ts";
import { LiveTracker } from "../../src/guard/live.ts";
import { loadRun, timelinePath } from "../../src/record/load.ts";
import { RunStore } from "../../src/record/store.ts";
import { summarizeTimelineFile } from "../../src/record/summary.ts";
import type { TimelineEntry } from "../../src/record/types.ts";
import { runReport } from "../../src/report/model.ts";

const GIB = 2 ** 30;
const T0 = 1763780000;
const MAIN = 5000;
const WORKER = 5001;

interface Step {
  pid: number;
  t: number;
  samples: number;
  wait_s?: number;
  compute_s?: number;
  warmup?: boolean;
}

/** Main process: 2 warm-up steps, 10 steady steps (one untimed); a second process steps 30 times, faster. */
function steps(): Step[] {
  const out: Step[] = [];
  let t = T0 + 1;
  for (let i = 0; i < 12; i++) {
    const wait = 0.05 * (1 + (i % 3));
    const compute = 0.4;
    t += wait + compute;
    if (i === 6)
      out.push({ pid: MAIN, t, samples: 32 }); // a step the reporter did not time
    else out.push({ pid: MAIN, t, samples: 32, wait_s: wait, compute_s: compute, warmup: i < 2 });
  }
  for (let i = 0; i < 30; i++) out.push({ pid: WORKER, t: T0 + 1.2 + 0.15 * i, samples: 8, wait_s: 0.01, compute_s: 0.1 });
  return out.sort((a, b) => a.t - b.t);
}

/** Readings at 2 Hz over 4 GPUs: the job uses 0 and 2; 1 and 3 belong to someone else (busy, but with constant memory and no utilization change is not the rule: util 0). */
function samples(until: number): TimelineEntry[] {
  const out: TimelineEntry[] = [];
  for (let t = T0 + 0.513, i = 0; t <= until + 1; t += 0.5, i++) {
    out.push({
      t,
      kind: "sample",
      tree: { pids: 3, rss_bytes: (2 + (i % 5) * 0.1) * GIB, cpu_percent: 150, gpu_bytes: (10 + (i % 7)) * GIB, gpu_pids: 2 },
      gpus: [
        { index: 0, used_bytes: (10 + (i % 7)) * GIB, total_bytes: 80 * GIB, util: 60 + (i % 4) * 10, sm_activity: 40, power_w: 300, energy_j: 1000 + 150 * i },
        { index: 1, used_bytes: 30 * GIB, total_bytes: 80 * GIB, util: 0, sm_activity: 0, power_w: 60, energy_j: 5000 + 30 * i },
        { index: 2, used_bytes: (4 + (i % 2)) * GIB, total_bytes: 80 * GIB, util: 20, sm_activity: 10, power_w: 120, energy_j: 2000 + 60 * i },
        { index: 3, used_bytes: 30 * GIB, total_bytes: 80 * GIB, util: 0, sm_activity: 0, power_w: 55, energy_j: 7000 + 27 * i },
      ],
      host: { mem_available_bytes: 100 * GIB, cpu_percent: 20 },
    });
  }
  return out;
}

function timeline(): TimelineEntry[] {
  const all = steps();
  const last = all[all.length - 1]?.t ?? T0;
  const entries: TimelineEntry[] = [
    { t: T0, kind: "start", pid: MAIN },
    { t: T0 + 0.2, kind: "hello", pid: MAIN, role: "main", rank: null },
    { t: T0 + 0.3, kind: "hello", pid: WORKER, role: "worker", rank: null },
    ...all.map((s) => ({ kind: "step", step: 0, micro_batch: s.samples, accumulation: 1, mem: { peak: 9 * GIB, peak_reserved: 10 * GIB }, ...s })),
    ...samples(last),
  ];
  entries.sort((a, b) => a.t - b.t);
  entries.push({ t: last + 2, kind: "end", cause: "ok", exit_code: 0, signal: null });
  return entries;
}

/** What the definitions say, computed here by hand from the same data. */
function expected(): { samplesPerS: number; waitShare: number; utilMean: number; peakGpu: number } {
  const steady = steps().filter((s) => s.pid === MAIN && s.warmup !== true && s.wait_s !== undefined);
  const busy = steady.reduce((a, s) => a + (s.wait_s ?? 0) + (s.compute_s ?? 0), 0);
  const start = Math.min(...steady.map((s) => s.t - (s.wait_s ?? 0) - (s.compute_s ?? 0)));
  const end = Math.max(...steady.map((s) => s.t));
  const inWindow = samples(end).filter((e) => e.t >= start && e.t <= end);
  const utils = inWindow.flatMap((e) => (e.gpus as { index: number; util: number }[]).filter((g) => g.index === 0 || g.index === 2).map((g) => g.util));
  return {
    samplesPerS: steady.reduce((a, s) => a + s.samples, 0) / busy,
    waitShare: steady.reduce((a, s) => a + (s.wait_s ?? 0), 0) / busy,
    utilMean: utils.reduce((a, b) => a + b, 0) / utils.length,
    peakGpu: 16 * GIB,
  };
}

const root = mkdtempSync(join(tmpdir(), "brim-one-model-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("one timeline, one set of numbers", () => {
  it("the summary, live view, doctor, report and dashboard state the same throughput, data wait, peak and GPU means", async () => {
    const entries = timeline();
    const want = expected();
    const store = new RunStore(join(root, "store"));
    const writer = await store.createRun(
      {
        kind: "run",
        tune_id: null,
        command: ["python", "train.py"],
        cwd: root,
        knobs: {},
        cap_bytes: null,
        cap_scope: "gpu",
        step_budget: null,
        device: {
          backend: "nvml",
          driver: "550",
          gpus: [0, 1, 2, 3].map((index) => ({ index, name: "NVIDIA A100-SXM4-80GB", uuid: null, total_bytes: 80 * GIB })),
          host: { cpus: 16, mem_total_bytes: 256 * GIB },
        },
        versions: {},
      },
      new Date(T0 * 1000),
    );
    for (const e of entries.filter((x) => x.kind !== "end")) writer.append(e);
    writer.flush();

    // the live view sees the job's messages and the readings the timeline keeps, as the guard feeds them
    const live = new LiveTracker({ startedAt: T0, capBytes: null, capScope: "gpu", totalSteps: null });
    live.started(T0, MAIN);
    for (const e of entries) {
      if (e.kind === "sample") {
        live.sample(e);
        const tree = e.tree as { gpu_bytes: number; rss_bytes: number };
        live.reading({
          t: e.t,
          usedBytes: tree.gpu_bytes,
          treeGpuBytes: tree.gpu_bytes,
          treeRssBytes: tree.rss_bytes,
          gpuUtil: null,
          smActivity: null,
          powerW: null,
          cpuPercent: null,
          processes: null,
        });
      } else if (e.kind === "step" || e.kind === "hello") {
        live.message({ ...e, v: 1, type: e.kind, pid: e.pid as number });
      }
    }
    const liveState = live.snapshot(T0 + 30);

    const path = timelinePath(store, writer.id);
    const summary = await summarizeTimelineFile(
      path,
      { treeGpuBytes: liveState.peakTreeGpuBytes ?? null, treeRssBytes: liveState.peakTreeRssBytes ?? null },
      20,
    );
    const end = entries[entries.length - 1] as TimelineEntry;
    await writer.finish({ cause: "ok", exit_code: 0, signal: null, message: "finished normally" }, summary, new Date(end.t * 1000));

    // the definitions, by hand: main process only, the untimed step left out, GPUs 0 and 2 only
    expect(summary.steady_steps).toBe(10);
    expect(summary.samples_per_s).toBeCloseTo(want.samplesPerS, 9);
    expect(summary.throughput_source).toBe("sdk");
    expect(summary.data_wait_share).toBeCloseTo(want.waitShare, 9);
    expect(summary.gpu_util_mean).toBeCloseTo(want.utilMean, 9);
    expect(summary.peak_tree_gpu_bytes).toBe(want.peakGpu);

    const run = await loadRun(store, writer.id);
    const doctor = diagnose(run.meta, run.timeline).measures;
    const report = runReport(run);
    const view = await runView(store, writer.id, (end.t + 1) * 1000);
    const [listed] = await listRuns(store, 10, (end.t + 1) * 1000);
    const streamed = liveCharts(run.meta, run.timeline);

    const stated = {
      summary: [summary.samples_per_s, summary.data_wait_share, summary.peak_tree_gpu_bytes, summary.gpu_util_mean, summary.sm_activity_mean],
      live: [liveState.steadySamplesPerS, liveState.steadyWaitShare, liveState.peakTreeGpuBytes, liveState.gpuUtilMean, liveState.smActivityMean],
      doctor: [doctor.samples_per_s, doctor.data_wait_share, doctor.peak_tree_gpu_bytes, doctor.gpu_util_mean, doctor.sm_activity_mean],
      report: [
        report.doctor.measures.samples_per_s,
        report.doctor.measures.data_wait_share,
        report.doctor.measures.peak_tree_gpu_bytes,
        report.doctor.measures.gpu_util_mean,
        report.doctor.measures.sm_activity_mean,
      ],
      dashboard: [listed?.samples_per_s, listed?.data_wait_share, listed?.peak_bytes, listed?.gpu_util_mean, view.model.doctor.measures.sm_activity_mean],
    };
    for (const [reader, values] of Object.entries(stated)) {
      expect(values.length, reader).toBe(5);
      values.forEach((v, i) => expect(v, `${reader}[${i}]`).toBeCloseTo(stated.summary[i] as number, 9));
    }

    // and in words: the report's rows, the dashboard page's and its live stream's say the same
    const rows = (numbers: { label: string; value: string }[]): Record<string, string> => Object.fromEntries(numbers.map((r) => [r.label, r.value]));
    for (const numbers of [report.numbers, view.model.numbers, streamed.numbers]) {
      const r = rows(numbers);
      expect(r["samples/s (steady state)"]).toBe(`${formatRate(want.samplesPerS)} over 10 steady steps`);
      expect(r["data wait"]).toBe(formatShare(want.waitShare));
      expect(r["GPU utilization (mean)"]).toBe(formatPercent(want.utilMean));
      expect(r["peak GPU memory (process tree)"]).toBe(formatMaybeBytes(want.peakGpu));
    }
  });
});
