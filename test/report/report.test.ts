import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { measureRun } from "../../src/analyze/measure.ts";
import { mainSteps, readTimeline } from "../../src/record/timeline/index.ts";
import { main } from "../../src/cli/main.ts";
import { RunStore } from "../../src/record/store.ts";
import { loadRun } from "../../src/record/load.ts";
import { runCharts } from "../../src/report/charts.ts";
import { runReport, tuneReport } from "../../src/report/model.ts";
import { perfettoTrace, type TraceFile } from "../../src/report/perfetto.ts";
import { downsample, formatAxisValue, niceTicks, renderChart } from "../../src/report/svg.ts";
import { resolveRecord, writeReport } from "../../src/report/write.ts";
import { GIB, TUNE_ID, syntheticRun, writeSyntheticRun, writeSyntheticTune } from "../analyze/synthetic.ts";

const FIXTURES = fileURLToPath(new URL("../fixtures/stores/", import.meta.url));

function temp(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `brim-report-${prefix}-`));
}

function attr(svg: string, selector: RegExp): string[] {
  return [...svg.matchAll(selector)].map((m) => m[1] ?? "");
}

describe("SVG charts", () => {
  it("draws each series with its values in data attributes and the domain on the plot", () => {
    const svg = renderChart({
      id: "t",
      title: "Memory <test>",
      x: { label: "time since start", kind: "time", min: 0 },
      y: { label: "memory", kind: "bytes", min: 0 },
      series: [
        {
          name: "rss",
          points: [
            [0, 1 * GIB],
            [1, 2 * GIB],
            [2, null],
            [3, 3 * GIB],
            [4, 2.5 * GIB],
          ],
        },
      ],
      lines: [{ axis: "y", value: 4 * GIB, label: "cap 4.00 GiB" }],
    });
    expect(svg).toContain("Memory &lt;test&gt;");
    const ys = attr(svg, /<polyline [^>]*data-y="([^"]*)"/g);
    expect(ys).toEqual([`${GIB} ${2 * GIB}`, `${3 * GIB} ${2.5 * GIB}`]);
    expect(svg).toMatch(/class="plot"[^>]*data-y-min="0" data-y-max="4294967296"/);
    expect(svg).toMatch(/data-axis="y" data-value="4294967296" data-label="cap 4\.00 GiB"/);
    expect(attr(svg, /class="tick"[^>]*>([^<]*)</g)).toContain("4 GiB");
  });

  it("keeps spikes when thinning long series", () => {
    const points = Array.from({ length: 20000 }, (_, i) => [i, i === 12345 ? 999 : i % 10] as const);
    const thin = downsample(points, 1000);
    expect(thin.length).toBeLessThanOrEqual(1000);
    expect(thin.some((p) => p[1] === 999)).toBe(true);
    expect(Math.min(...thin.map((p) => p[1] ?? 0))).toBe(0);
  });

  it("labels axes in their units", () => {
    expect(niceTicks(0, 97, "percent")).toEqual({ min: 0, max: 100, ticks: [0, 20, 40, 60, 80, 100] });
    expect(formatAxisValue(600, "time", 1200)).toBe("10 min");
    expect(formatAxisValue(1.5 * GIB, "bytes", 8 * GIB)).toBe("1.5 GiB");
    expect(niceTicks(0, 7 * GIB, "bytes").ticks.map((v) => v / GIB)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(niceTicks(0, 11 * GIB, "bytes").ticks.map((v) => v / GIB)).toEqual([0, 2, 4, 6, 8, 10, 12]);
  });

  it("says so when nothing was recorded", () => {
    expect(renderChart({ id: "e", title: "x", x: { label: "x" }, y: { label: "y" }, series: [], empty: "no GPU readings" })).toContain(">no GPU readings<");
  });
});

describe("run charts from recorded values", () => {
  it("plots per-step throughput, data wait, GPU utilization and memory against the cap", () => {
    const { meta, timeline } = syntheticRun({ steps: 30, wait: (i) => (i % 2 === 0 ? 0.1 : 0.3), compute: () => 0.2, cap: 40 * GIB, sm: 55 });
    const tl = readTimeline(timeline);
    const m = measureRun(meta, tl);
    const [util, memory, throughput, wait] = runCharts(meta, tl, m);
    const steady = mainSteps(tl).filter((s) => !s.warmup);
    expect(throughput?.series[0]?.points.map((p) => p[1])).toEqual(steady.map((s) => (s.samples ?? 0) / ((s.wait_s ?? 0) + (s.compute_s ?? 0))));
    expect(wait?.series[0]?.points.map((p) => p[1])).toEqual(steady.map((s) => (100 * (s.wait_s ?? 0)) / ((s.wait_s ?? 0) + (s.compute_s ?? 0))));
    expect(util?.series.map((s) => s.name)).toEqual(["utilization", "SM activity"]);
    expect(util?.series[0]?.points.map((p) => p[1])).toEqual(tl.samples.map((s) => s.gpus[0]?.util));
    expect(memory?.lines?.map((l) => l.label)).toEqual(["cap 40.0 GiB", "card 80.0 GiB"]);
    expect(memory?.series.map((s) => s.name)).toEqual(["job's processes (NVML)", "PyTorch reserved", "PyTorch allocated"]);
  });

  it("draws CPU use and RSS for a CPU run", () => {
    const { meta, timeline } = syntheticRun({ gpu: null, cap: 4 * GIB, cpus: 8 });
    const tl = readTimeline(timeline);
    const [util, memory] = runCharts(meta, tl, measureRun(meta, tl));
    expect(util?.title).toBe("CPU use (no GPU in this run)");
    expect(util?.lines?.[0]).toMatchObject({ value: 8, label: "8 cores" });
    expect(memory?.series[0]?.name).toBe("RSS of the job's processes");
    expect(memory?.lines?.[0]?.label).toBe("cap 4.00 GiB");
  });
});

describe("reports", () => {
  let store: RunStore;
  let runId: string;
  let baseId: string;
  beforeAll(async () => {
    store = new RunStore(temp("store"));
    baseId = (
      await writeSyntheticRun(store, { wait: () => 0.3, compute: () => 0.2, workers: 0, precision: "fp32", treeGpuBytes: 10 * GIB }, new Date(1763700000000))
    ).id;
    runId = (
      await writeSyntheticRun(
        store,
        { wait: () => 0.01, compute: () => 0.2, workers: 8, batch: 64, precision: "bf16-mixed", treeGpuBytes: 18 * GIB },
        new Date(1763800000000),
      )
    ).id;
    await writeSyntheticTune(store);
  });

  it("writes Markdown, HTML and SVG charts for a run, with a before/after table", async () => {
    const out = temp("run");
    const result = await writeReport(store, runId, { vs: baseId, out, png: false });
    expect(result.files.map((f) => f.path.slice(out.length + 1)).sort()).toEqual([
      "charts/data_wait.svg",
      "charts/loss.svg",
      "charts/memory.svg",
      "charts/throughput.svg",
      "charts/throughput_steps.svg",
      "charts/utilization.svg",
      "report.html",
      "report.md",
    ]);
    const md = readFileSync(join(out, "report.md"), "utf8");
    expect(md).toMatch(/^# brim report: Run /);
    expect(md).toContain("## Before and after");
    const before = measureRun(...(await loadRun(store, baseId).then((r) => [r.meta, r.timeline] as const)));
    const after = measureRun(...(await loadRun(store, runId).then((r) => [r.meta, r.timeline] as const)));
    const speedup = (after.samples_per_s ?? 0) / (before.samples_per_s ?? 1);
    expect(result.model.comparison?.speedup).toBeCloseTo(speedup, 9);
    expect(md).toContain(`| **speedup** | 1.00× | **${speedup.toFixed(2)}×** |  |`);
    expect(md).toMatch(/\| micro-batch \| 32 \| 64 \| ×2\.00 \|/);
    expect(md).toMatch(/\| precision \| fp32 \| bf16-mixed \| changed \|/);
    expect(md).toMatch(/\| peak GPU memory \| 10\.0 GiB \| 18\.0 GiB \| \+8\.00 GiB \|/);
    expect(md).toContain("![GPU utilization and SM activity](charts/utilization.svg)");
    const html = readFileSync(join(out, "report.html"), "utf8");
    expect(html).not.toMatch(/<script|<link|src="http|href="http/);
    expect((html.match(/<svg /g) ?? []).length).toBe(6); // --vs: the four run charts overlaid, loss and throughput by step
    expect(html).toContain('data-key="speedup"');
    expect(readFileSync(join(out, "charts/memory.svg"), "utf8")).toMatch(/^<\?xml version="1\.0"/);
  });

  it("writes a tune report with the curves, the cap, the fitted memory line and baseline against winner", async () => {
    const out = temp("tune");
    const result = await writeReport(store, TUNE_ID, { out, png: false });
    expect(result.kind).toBe("tune");
    const model = result.model;
    if (model.kind !== "tune") throw new Error("expected a tune model");
    expect(model.charts.map((c) => c.id)).toEqual(["tune_throughput", "tune_memory"]);
    const memory = readFileSync(join(out, "charts/tune_memory.svg"), "utf8");
    expect(memory).toMatch(/data-axis="y" data-value="17179869184" data-label="cap 16\.0 GiB"/);
    expect(memory).toMatch(/data-axis="x" data-value="211" data-label="fits ≤ 211"/);
    expect(memory).toMatch(/data-series="fitted memory line" data-style="dashed"/);
    const peaks = attr(memory, /<circle [^>]*data-x="(\d+)" data-y="\d+"/g).map(Number);
    expect(peaks).toEqual([32, 64, 32, 64, 128]);
    const throughput = readFileSync(join(out, "charts/tune_throughput.svg"), "utf8");
    expect(attr(throughput, /<g class="series" data-series="([^"]+)"/g)).toEqual(["precision=fp32", "precision=bf16-mixed", "winner", "failed (OOM or crash)"]);
    expect(throughput).toMatch(/data-x-scale="log2"/);
    expect(model.comparison?.before.label).toBe("baseline (trial 0)");
    expect(model.comparison?.after.label).toBe("winner (trial 4)");
    const md = readFileSync(join(out, "report.md"), "utf8");
    expect(md).toMatch(/\| 4 ★ \| search \| batch_size=128, precision=bf16-mixed \| ok \|/);
    expect(md).toMatch(/\| 5 \| search \| batch_size=256, precision=bf16-mixed \| gpu_oom \|/);
  });

  it("reports a run that is still going, from its timeline so far", async () => {
    const { id, writer } = await writeSyntheticRun(store, { running: true, steps: 8, wait: () => 0.3, compute: () => 0.2 }, new Date(1763900000000));
    const out = temp("running");
    const result = await writeReport(store, id, { out, png: false });
    const md = readFileSync(join(out, "report.md"), "utf8");
    expect(md).toMatch(/\| end \| still running/);
    expect(md).toMatch(/> The run has not ended/);
    expect(result.model.kind === "run" && result.model.doctor.findings[0]?.id).toBe("data_starved");
    await writer.finish({ cause: "ok", exit_code: 0, signal: null, message: "finished normally" }, null);
  });

  it("falls back to tune.json's numbers for trials whose runs are gone", async () => {
    const tune = await store.readTune(TUNE_ID);
    const model = tuneReport(tune, new Map());
    expect(model.notes.join(" ")).toMatch(/6 trial runs are not in the store/);
    expect(model.comparison?.speedup).toBeCloseTo((tune.trials[4]?.samples_per_s ?? 0) / (tune.trials[0]?.samples_per_s ?? 1), 9);
  });

  it("exports a Perfetto trace: steps as slices per pid, readings as counters", async () => {
    const run = await loadRun(store, runId);
    const trace = perfettoTrace([run]);
    const tl = run.timeline;
    const steps = trace.traceEvents.filter((e) => e.cat === "step");
    expect(steps).toHaveLength(tl.steps.length);
    expect(steps[5]?.dur).toBe(Math.round(((tl.steps[5]?.wait_s ?? 0) + (tl.steps[5]?.compute_s ?? 0)) * 1e6));
    expect(steps.every((e) => e.ph === "X" && e.pid === 4242 && e.tid === 4242)).toBe(true);
    const waits = trace.traceEvents.filter((e) => e.name === "data wait");
    expect(waits[0]?.ts).toBe(steps[0]?.ts);
    const util = trace.traceEvents.filter((e) => e.ph === "C" && e.name === "GPU 0 activity (%)");
    expect(util.map((e) => e.args?.utilization)).toEqual(tl.samples.map((s) => s.gpus[0]?.util));
    expect(trace.traceEvents.find((e) => e.ph === "M" && e.pid === 4242)?.args?.name).toMatch(/pid 4242 \(main\)/);
    expect(trace.traceEvents.some((e) => e.ph === "i" && e.name === "knob_read")).toBe(true);
  });

  it("writes trace.json with --perfetto and a tune's trials side by side", async () => {
    const out = temp("trace");
    const result = await writeReport(store, TUNE_ID, { out, png: false, perfetto: true });
    const trace = JSON.parse(readFileSync(join(out, "trace.json"), "utf8")) as TraceFile;
    expect(result.files.some((f) => f.kind === "trace")).toBe(true);
    expect(trace.traceEvents.filter((e) => e.ph === "M" && e.name === "process_name" && String(e.args?.name).endsWith("brim sampler"))).toHaveLength(6);
  });

  it("resolves runs and tunes by id, prefix and latest", async () => {
    expect(await resolveRecord(store, TUNE_ID)).toEqual({ kind: "tune", id: TUNE_ID });
    expect(await resolveRecord(store, runId.slice(-4))).toEqual({ kind: "run", id: runId });
    expect((await resolveRecord(store, "latest")).kind).toBe("run");
    await expect(resolveRecord(store, "abcdef")).rejects.toThrow(/'abcdef' is neither a run nor a tune/);
  });

  it("runs from the command line, JSON included, without PNG when asked", async () => {
    let stdout = "";
    let stderr = "";
    const out = { stdout: (t: string) => void (stdout += t), stderr: (t: string) => void (stderr += t) };
    const dir = temp("cli");
    const code = await main(["report", runId, "--vs", baseId, "--store", store.root, "--out", dir, "--no-png", "--json"], out);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const json = JSON.parse(stdout) as { kind: string; dir: string; files: { kind: string }[]; comparison: { speedup: number }; png: { note: string } };
    expect(json.kind).toBe("run");
    expect(json.dir).toBe(dir);
    expect(json.png.note).toBe("PNG charts not requested (--no-png).");
    expect(json.comparison.speedup).toBeGreaterThan(1);
    stdout = "";
    expect(await main(["report", runId, "--store", store.root, "--no-png"], out)).toBe(0);
    expect(stdout).toMatch(/^brim report · run \S+ → .*reports\/\S+\n {2}markdown /);
    expect(existsSync(join(store.root, "reports", runId, "report.html"))).toBe(true);
    stdout = "";
    stderr = "";
    expect(await main(["report", runId, "--vs", runId, "--store", store.root, "--no-png"], out)).toBe(2);
    expect(stderr).toMatch(/--vs names the same run/);
  });

  it("reports a real recorded tune: trial curves, the fitted line, the winner against the baseline", async () => {
    const s = new RunStore(join(FIXTURES, "cnn-lstm-tune"));
    expect((await resolveRecord(s, "latest")).kind).toBe("tune");
    const out = temp("real-tune");
    const result = await writeReport(s, "latest", { out, png: false });
    const model = result.model;
    if (model.kind !== "tune") throw new Error("expected a tune");
    const tune = await s.readTune(result.id);
    const drawn = model.charts[0]?.series.filter((x) => x.name === "trials").flatMap((x) => x.points) ?? [];
    const ok = tune.trials.filter((t) => t.end === "ok");
    expect(drawn).toHaveLength(ok.length);
    expect([...drawn].sort((a, b) => (a[1] ?? 0) - (b[1] ?? 0)).map((p) => p[1])).toEqual(ok.map((t) => t.samples_per_s).sort((a, b) => (a ?? 0) - (b ?? 0)));
    const memory = readFileSync(join(out, "charts/tune_memory.svg"), "utf8");
    expect(memory).toContain(`fits ≤ ${tune.memory_line?.predicted_max_micro_batch}, beyond the chart`);
    expect(memory).toMatch(/the cap, 11\.\d GiB, is far above/);
    const winner = tune.trials.find((t) => t.index === tune.winner?.index);
    expect(model.comparison?.speedup).toBeCloseTo((winner?.samples_per_s ?? 0) / (tune.trials[0]?.samples_per_s ?? 1), 1);
  });

  it("reports a real recorded run against its before", async () => {
    const s = new RunStore(join(FIXTURES, "cnn-lstm"));
    const [first, second] = await s.runIds();
    if (first === undefined || second === undefined) throw new Error("fixture store needs two runs");
    const model = runReport(await loadRun(s, second), await loadRun(s, first));
    expect(model.comparison?.rows.find((r) => r.key === "data_wait_share")?.change).toMatch(/^−\d+\.\d pts$/);
    expect(model.comparison?.rows.find((r) => r.key === "utilization")?.label).toBe("CPU of the job (100 % = one core)");
    expect(model.doctor.findings.map((f) => f.id)).toEqual(["cpu_run"]);
  });
});
