// brim report --vs: both runs on every chart (the earlier one dashed, each series named by its run),
// loss and throughput by step for both, and the knobs that differ in the comparison. The HTML is
// opened in headless Chromium to check what is drawn (skipped only where /usr/bin/chromium is missing).
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";
import { describe, expect, it } from "vitest";
import { RunStore } from "../../src/record/store.ts";
import { writeReport } from "../../src/report/write.ts";
import { CHROMIUM_ARGS } from "../helpers/chromium.ts";
import { writeSyntheticRun } from "../analyze/synthetic.ts";

const CHROMIUM = "/usr/bin/chromium";
const ALL = ["utilization", "memory", "throughput", "data_wait", "loss", "throughput_steps"];

async function twoRuns(): Promise<{ store: RunStore; before: string; after: string }> {
  const store = new RunStore(mkdtempSync(join(tmpdir(), "brim-report-vs-")));
  const before = (
    await writeSyntheticRun(store, { steps: 20, warmup: 2, batch: 32, knobs: { batch_size: 32, precision: "fp32" } }, new Date(Date.now() - 120_000))
  ).id;
  const after = (
    await writeSyntheticRun(store, { steps: 20, warmup: 2, batch: 128, knobs: { batch_size: 128, precision: "bf16-mixed" } }, new Date(Date.now() - 60_000))
  ).id;
  return { store, before, after };
}

describe("brim report --vs", () => {
  it("overlays both runs on every chart and lists the knobs that differ", async () => {
    const { store, before, after } = await twoRuns();
    const out = mkdtempSync(join(tmpdir(), "brim-report-vs-out-"));
    const result = await writeReport(store, after, { vs: before, out, env: {} });
    expect(result.model.charts.map((c) => c.id)).toEqual(ALL);
    for (const id of ALL) {
      const svg = readFileSync(join(out, "charts", `${id}.svg`), "utf8");
      const series = [...svg.matchAll(/<g class="series" data-series="([^"]+)"/g)].map((m) => m[1] as string);
      const legend = [...svg.matchAll(/<g class="legend-item" data-series="([^"]+)"/g)].map((m) => m[1] as string);
      expect(legend, id).toEqual(series);
      expect(
        series.some((s) => s.startsWith("after: ")),
        id,
      ).toBe(true);
      expect(
        series.some((s) => s.startsWith("before: ")),
        id,
      ).toBe(true);
      expect(existsSync(join(out, "charts", `${id}.png`))).toBe(true);
    }
    const md = readFileSync(join(out, "report.md"), "utf8");
    expect(md).toContain("Knobs that differ (before → after): batch_size 32 → 128; precision fp32 → bf16-mixed.");
    expect(md).toContain("![Loss by step](charts/loss.png)");
  });

  it.skipIf(!existsSync(CHROMIUM))("draws both runs' lines in the HTML report (headless Chromium)", async () => {
    const { store, before, after } = await twoRuns();
    const out = mkdtempSync(join(tmpdir(), "brim-report-vs-html-"));
    expect(before).not.toBe(after);
    await writeReport(store, after, { vs: before, out, png: false });
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await page.goto(pathToFileURL(join(out, "report.html")).href);
      for (const id of ["throughput", "loss", "throughput_steps"]) {
        const chart = page.locator(`svg[data-chart="${id}"]`);
        for (const who of ["after", "before"]) {
          const line = chart.locator(`g.series[data-series^="${who}: "] polyline`).first();
          const box = await line.boundingBox();
          expect(box?.width, `${id} ${who}`).toBeGreaterThan(100);
        }
      }
      await expect(page.locator("p.note", { hasText: "Knobs that differ" }).count()).resolves.toBe(1);
    } finally {
      await browser.close();
    }
  });
});
