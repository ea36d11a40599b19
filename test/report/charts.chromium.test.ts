/**
 * Reports in a real headless Chromium (Debian's /usr/bin/chromium through playwright-core): the HTML
 * loads, every chart is drawn, and what is drawn is the recorded values; PNG charts come out.
 * Skipped, with a message, only where /usr/bin/chromium is missing (.ci/setup installs it).
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mainSteps, readTimeline } from "../../src/record/timeline/index.ts";
import { RunStore } from "../../src/record/store.ts";
import { CHROMIUM_ARGS } from "../helpers/chromium.ts";
import { writeReport } from "../../src/report/write.ts";
import { TUNE_ID, writeSyntheticTune } from "../analyze/synthetic.ts";

const CHROMIUM = "/usr/bin/chromium";
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) console.warn(`skipping the report's Chromium tests: ${CHROMIUM} is missing (.ci/setup installs Debian's chromium)`);

const FIXTURES = fileURLToPath(new URL("../fixtures/stores/", import.meta.url));

interface DrawnSeries {
  name: string;
  values: number[];
  pixels: [number, number][];
  width: number;
}

interface DrawnChart {
  id: string;
  plot: { x: number; y: number; w: number; h: number; yMin: number; yMax: number };
  series: DrawnSeries[];
  labels: string[];
  refs: { label: string; value: number }[];
}

/**
 * Reads, in the page, what each chart drew: polyline pixels, their data-y, the plot box and labels.
 * Plain JavaScript run by the browser (the project's TypeScript has no DOM types).
 */
export const READ_CHARTS = `[...document.querySelectorAll("svg.brim-chart")].map((svg) => {
  const rect = svg.querySelector("rect.plot");
  const series = [...svg.querySelectorAll("g.series")].map((g) => {
    const lines = [...g.querySelectorAll("polyline")];
    return {
      name: g.getAttribute("data-series") || "",
      values: lines.flatMap((l) => (l.getAttribute("data-y") || "").split(" ").filter((v) => v !== "").map(Number)),
      pixels: lines.flatMap((l) => [...l.points].map((p) => [p.x, p.y])),
      width: lines.reduce((a, l) => a + l.getBBox().width, 0),
    };
  });
  return {
    id: svg.getAttribute("data-chart") || "",
    plot: { x: rect.x.baseVal.value, y: rect.y.baseVal.value, w: rect.width.baseVal.value, h: rect.height.baseVal.value,
            yMin: Number(rect.getAttribute("data-y-min")), yMax: Number(rect.getAttribute("data-y-max")) },
    series,
    labels: [...svg.querySelectorAll("text")].map((t) => t.textContent || ""),
    refs: [...svg.querySelectorAll("g.ref-line")].map((r) => ({ label: r.getAttribute("data-label") || "", value: Number(r.getAttribute("data-value")) })),
  };
})`;

function pngSize(bytes: Buffer): { width: number; height: number } {
  expect(bytes.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

describe.skipIf(!HAVE_CHROMIUM)("reports in headless Chromium", () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("draws a recorded run's charts with the recorded values, and writes PNGs", async () => {
    const store = new RunStore(join(FIXTURES, "cnn-lstm"));
    const id = (await store.runIds())[0] as string;
    const out = mkdtempSync(join(tmpdir(), "brim-report-chromium-"));
    const result = await writeReport(store, id, { out });
    expect(result.png).toEqual({ written: 5, note: null });
    for (const name of ["utilization", "memory", "throughput", "data_wait", "loss"]) {
      const png = readFileSync(join(out, "charts", `${name}.png`));
      expect(png.length).toBeGreaterThan(5000);
      expect(pngSize(png)).toEqual({ width: 760 * 2, height: 280 * 2 });
    }
    expect(readFileSync(join(out, "report.md"), "utf8")).toContain("![Throughput over time](charts/throughput.png)");

    const page = await browser.newPage();
    await page.goto(pathToFileURL(join(out, "report.html")).href);
    const charts = await page.evaluate<DrawnChart[]>(READ_CHARTS);
    await page.close();
    expect(charts.map((c) => c.id)).toEqual(["utilization", "memory", "throughput", "data_wait", "loss"]);

    const { timeline } = await store.readRun(id);
    const tl = readTimeline(timeline);
    const steady = mainSteps(tl).filter((s) => !s.warmup);
    const throughput = charts.find((c) => c.id === "throughput") as DrawnChart;
    const drawn = throughput.series.find((s) => s.name === "samples/s") as DrawnSeries;
    const recorded = steady.map((s) => (s.samples ?? 0) / ((s.wait_s ?? 0) + (s.compute_s ?? 0)));
    expect(drawn.values).toHaveLength(recorded.length);
    drawn.values.forEach((v, i) => expect(v).toBeCloseTo(recorded[i] as number, 2));
    const { plot } = throughput;
    drawn.pixels.forEach(([, y], i) =>
      expect(y).toBeCloseTo(plot.y + plot.h - (((drawn.values[i] as number) - plot.yMin) / (plot.yMax - plot.yMin)) * plot.h, 1),
    );
    expect(drawn.width).toBeGreaterThan(plot.w * 0.5);
    expect(throughput.labels).toEqual(expect.arrayContaining(["Throughput over time", "samples per second", "time since start"]));

    const memory = charts.find((c) => c.id === "memory") as DrawnChart;
    expect(memory.series[0]?.name).toBe("RSS of the job's processes");
    expect(memory.series[0]?.values).toEqual(tl.samples.map((s) => s.tree.rss_bytes).filter((v) => v !== null));
    expect(memory.labels.some((l) => / MiB$/.test(l))).toBe(true);

    const wait = charts.find((c) => c.id === "data_wait") as DrawnChart;
    wait.series[0]?.values.forEach((v, i) =>
      expect(v).toBeCloseTo((100 * (steady[i]?.wait_s ?? 0)) / ((steady[i]?.wait_s ?? 0) + (steady[i]?.compute_s ?? 0)), 2),
    );
  });

  it("draws a tune's curves with the cap and the fitted memory line", async () => {
    const store = new RunStore(mkdtempSync(join(tmpdir(), "brim-report-tune-")));
    const { tune } = await writeSyntheticTune(store);
    const out = mkdtempSync(join(tmpdir(), "brim-report-tune-out-"));
    await writeReport(store, TUNE_ID, { out });
    expect(pngSize(readFileSync(join(out, "charts", "tune_memory.png"))).width).toBe(1520);
    const page = await browser.newPage();
    await page.goto(pathToFileURL(join(out, "report.html")).href);
    const charts = await page.evaluate<DrawnChart[]>(READ_CHARTS);
    const winnerRow = await page.locator("tr.winner").textContent();
    await page.close();
    const memory = charts.find((c) => c.id === "tune_memory") as DrawnChart;
    expect(memory.refs.map((r) => r.label)).toEqual(["cap 16.0 GiB", "cap − margin 14.4 GiB", "fits ≤ 211"]);
    const line = memory.series.find((s) => s.name === "fitted memory line") as DrawnSeries;
    const ml = tune.memory_line;
    if (ml === null) throw new Error("synthetic tune has a memory line");
    expect(line.values[0]).toBeCloseTo(ml.intercept_bytes + ml.bytes_per_sample, -3);
    expect(line.width).toBeGreaterThan(100);
    const throughput = charts.find((c) => c.id === "tune_throughput") as DrawnChart;
    expect(throughput.series.find((s) => s.name === "precision=bf16-mixed")?.values).toEqual(
      tune.trials.filter((t) => t.knobs.precision === "bf16-mixed" && t.end === "ok").map((t) => Number((t.samples_per_s ?? 0).toPrecision(6))),
    );
    expect(winnerRow).toMatch(/^4 ★/);
  });

  it("writes the report without PNGs, and says why, when no font is there", async () => {
    const store = new RunStore(join(FIXTURES, "nbeats"));
    const out = mkdtempSync(join(tmpdir(), "brim-report-nofont-"));
    const result = await writeReport(store, "latest", { out, env: { BRIM_FONT_DIRS: mkdtempSync(join(tmpdir(), "brim-no-fonts-")) } });
    expect(result.png.written).toBe(0);
    expect(result.png.note).toMatch(/^PNG charts skipped: no font found under /);
    expect(readFileSync(join(out, "report.md"), "utf8")).toMatch(/> PNG charts skipped: no font found/);
    expect(existsSync(join(out, "charts", "memory.svg"))).toBe(true);
  });
});
