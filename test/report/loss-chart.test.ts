import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readTimeline } from "../../src/record/timeline/index.ts";
import { RunStore } from "../../src/record/store.ts";
import { lossChart, lossScale, metricCharts, progressCharts, smoothPoints } from "../../src/report/progress.ts";
import { renderChart } from "../../src/report/svg.ts";
import { writeReport } from "../../src/report/write.ts";
import { syntheticRun, writeSyntheticRun } from "../analyze/synthetic.ts";

// `brim report <run>` draws the loss whenever there is one: raw points, a smoothed line over them,
// a log axis when the loss spans decades.

function withLoss(loss: (i: number) => number | string | null) {
  const { meta, timeline } = syntheticRun({ steps: 60 });
  let i = 0;
  const entries = timeline.map((e) => (e.kind === "step" ? { ...e, loss: loss(i++) } : e));
  return { label: "this run", meta, timeline: readTimeline(entries) };
}

describe("the loss chart", () => {
  it("smooths like TensorBoard: de-biased, weight 0 is the raw series, nulls passed over", () => {
    expect(
      smoothPoints(
        [
          [0, 10],
          [1, 0],
        ],
        0.5,
      ),
    ).toEqual([
      [0, 10],
      [1, 10 / 3],
    ]);
    expect(
      smoothPoints(
        [
          [0, 3],
          [1, null],
          [2, 5],
        ],
        0,
      ),
    ).toEqual([
      [0, 3],
      [2, 5],
    ]);
    const flat = smoothPoints(
      Array.from({ length: 50 }, (_, i) => [i, 2] as const),
      0.9,
    );
    expect(flat.every(([, y]) => Math.abs(y - 2) < 1e-12)).toBe(true); // no bias toward 0 at the start
  });

  it("goes logarithmic past 1.5 decades of positive losses only", () => {
    expect(
      lossScale([
        [0, 8],
        [1, 0.05],
      ]),
    ).toBe("log10");
    expect(
      lossScale([
        [0, 2.3],
        [1, 0.2],
      ]),
    ).toBe("linear"); // 1.06 decades
    expect(
      lossScale([
        [0, 8],
        [1, 0.05],
        [2, -1],
      ]),
    ).toBe("linear");
  });

  it("draws raw points and the smoothed line; a spike at step 0 puts the axis on log10 with decade ticks", () => {
    const chart = lossChart([withLoss((i) => (i === 0 ? 50 : 1 / (i + 1)))]);
    expect(chart?.y.scale).toBe("log10");
    expect(chart?.series.map((s) => [s.name, s.style ?? "line"])).toEqual([
      ["loss", "points"],
      ["loss, smoothed", "line"],
    ]);
    const svg = renderChart(chart!);
    expect(svg).toContain('data-y-scale="log10"');
    expect(svg).toMatch(/data-y-min="0\.01" data-y-max="100"/);
  });

  it("is absent with no loss and skips non-finite values", () => {
    expect(lossChart([withLoss(() => null)])).toBeNull();
    const chart = lossChart([withLoss((i) => (i === 3 ? "nan" : 2 - i * 0.01))]);
    expect(chart?.y.scale).toBe("linear");
    expect(chart?.series[0]?.points.length).toBe(59);
  });

  it("brim report <run> (no --vs) writes charts/loss.svg", async () => {
    const store = new RunStore(mkdtempSync(join(tmpdir(), "brim-loss-report-")));
    const { id } = await writeSyntheticRun(store, {});
    const out = mkdtempSync(join(tmpdir(), "brim-loss-report-out-"));
    const result = await writeReport(store, id, { out, png: false });
    expect(result.files.map((f) => f.path.slice(out.length + 1))).toContain("charts/loss.svg");
    const svg = readFileSync(join(out, "charts/loss.svg"), "utf8");
    expect(svg).toContain('data-series="loss, smoothed"');
    expect(readFileSync(join(out, "report.md"), "utf8")).toContain("![Loss by step](charts/loss.svg)");
  });
});

describe("the job's own logged scalars", () => {
  const withExtra = (extra: (i: number) => Record<string, unknown> | undefined) => {
    const { meta, timeline } = syntheticRun({ steps: 30 });
    let i = 0;
    const entries = timeline.map((e) => (e.kind === "step" ? { ...e, extra: extra(i++) } : e));
    return { label: "this run", meta, timeline: readTimeline(entries) };
  };

  it("are read from a step's extra fields (finite numbers only) and drawn one chart each, as the loss is", () => {
    const run = withExtra((i) => (i % 10 === 0 ? { learning_rate: 0.1 / (i + 1), grad_norm: 2, note: "text", bad: Number.NaN } : { train_loss: 3 - i * 0.05 }));
    const steps = run.timeline.steps;
    expect(steps[0]?.metrics).toEqual({ learning_rate: 0.1, grad_norm: 2 });
    expect(steps[1]?.metrics).toEqual({ train_loss: 2.95 });
    const charts = metricCharts([run]);
    expect(charts.map((c) => c.id)).toEqual(["metric-learning_rate", "metric-grad_norm", "metric-train_loss"]);
    expect(charts[0]?.title).toBe("learning_rate (logged by the job) by step");
    expect(charts[2]?.series.map((s) => s.name)).toEqual(["train_loss", "train_loss, smoothed"]);
    expect(charts[2]?.series[0]?.points.length).toBe(27);
    // the dashboard's progress charts carry them after loss and throughput
    expect(progressCharts([run]).map((c) => c.id)).toEqual(["loss", "throughput_steps", "metric-learning_rate", "metric-grad_norm", "metric-train_loss"]);
  });

  it("are none without extra fields, and at most eight charts", () => {
    expect(metricCharts([withExtra(() => undefined)])).toEqual([]);
    const many = withExtra(() => Object.fromEntries(Array.from({ length: 12 }, (_, k) => [`m${k}`, k])));
    expect(metricCharts([many]).length).toBe(8);
  });
});

describe("a chart's legend", () => {
  it("wraps onto a second row where it would run past the right edge, and moves the plot down by a row (the --vs CPU chart's fourth entry was cut off)", () => {
    const names = ["after: CPU of the job's processes", "after: whole host", "before: CPU of the job's processes", "before: whole host"];
    const svg = renderChart({
      id: "cpu",
      title: "CPU use",
      x: { label: "time", kind: "time" },
      y: { label: "cores busy", kind: "number" },
      series: names.map((name, i) => ({
        name,
        points: [
          [0, i],
          [1, i + 1],
        ] as [number, number][],
      })),
    });
    const rows = [...svg.matchAll(/<g class="legend-item" data-series="([^"]+)">\n<line x1="([\d.]+)" y1="(\d+)"/g)].map((m) => [
      m[1]?.replace(/&#39;/g, "'"),
      Number(m[3]),
    ]);
    expect(rows).toEqual([
      [names[0], 32],
      [names[1], 32],
      [names[2], 32],
      [names[3], 48],
    ]);
    expect(svg).toMatch(/<rect class="plot" x="68" y="66"/);
    expect(svg).toMatch(/height="296" viewBox="0 0 760 296"/);
    const short = renderChart({
      id: "one",
      title: "t",
      x: { label: "x", kind: "number" },
      y: { label: "y", kind: "number" },
      series: [{ name: "loss", points: [[0, 1]] }],
    });
    expect(short).toMatch(/<rect class="plot" x="68" y="50"/);
  });
});
