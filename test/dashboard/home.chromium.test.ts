/**
 * The dashboard's home and run pages in a real headless Chromium (1280 px wide): trials grouped under
 * their tune and named by their knobs, the filter, auto-refresh, charts that fill the width (checked
 * on the element's geometry and a screenshot of it, with its legend and series), and the end state of
 * a run page that was live. Skipped, with a message, only where /usr/bin/chromium is missing.
 */
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDashboard, type Dashboard } from "../../src/dashboard/server.ts";
import { RunStore } from "../../src/record/store.ts";
import { CHROMIUM_ARGS } from "../helpers/chromium.ts";
import { TUNE_ID, writeSyntheticRun, writeSyntheticTune } from "../analyze/synthetic.ts";
import { scaled } from "../helpers/time.ts";

const CHROMIUM = "/usr/bin/chromium";
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) console.warn(`skipping the dashboard home Chromium test: ${CHROMIUM} is missing (.ci/setup installs Debian's chromium)`);

function pngSize(bytes: Buffer): { width: number; height: number } {
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

describe.skipIf(!HAVE_CHROMIUM)("dashboard home and run pages in headless Chromium", () => {
  let browser: Browser;
  let dash: Dashboard;
  let store: RunStore;
  let plainRun: string;

  beforeAll(async () => {
    store = new RunStore(mkdtempSync(join(tmpdir(), "brim-dash-home-")));
    await writeSyntheticTune(store);
    plainRun = (await writeSyntheticRun(store, { steps: 30, warmup: 3 }, new Date(Date.now() - 60_000))).id;
    dash = await startDashboard({ store, port: 0, token: null, pollMs: 100, chartEveryMs: 150 });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  });

  afterAll(async () => {
    await browser?.close();
    await dash?.close();
  });

  it("groups trials under their tune, named by knob values; filters; refreshes itself", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(dash.url);
    const trialIds = (await store.readTune(TUNE_ID)).trials.map((t) => t.run_id);
    // the runs table holds the plain run only; the trials sit in the tune's group
    await expect(page.locator("table.runs:not(.trials) > tbody > tr").count()).resolves.toBe(1);
    await expect(page.locator(`table.runs:not(.trials) tr[data-run-id="${plainRun}"]`).count()).resolves.toBe(1);
    const group = page.locator(`tr.trials[data-trials-of="${TUNE_ID}"]`);
    await expect(group.locator("tr.trial").count()).resolves.toBe(trialIds.length);
    await expect(group.locator("summary").textContent()).resolves.toBe(`${trialIds.length} trial runs`);
    const names = await group.locator("tr.trial a.name").allTextContents();
    expect(names.every((n) => /^batch_size=\d+ precision=\S+$/.test(n))).toBe(true);
    expect(names.join(" ")).not.toMatch(/brim-trial|\.yaml/);
    const tune = await store.readTune(TUNE_ID);
    await expect(page.locator(`tr[data-tune-id="${TUNE_ID}"] [data-trials]`).textContent()).resolves.toBe(
      `${tune.trials.filter((t) => t.end === "ok").length} ok of ${tune.trials.length}`,
    );

    // filter: a knob value keeps the tune (its group opened on the matching trials) and hides the plain run
    const oneName = names[0] as string;
    const mb = /batch_size=(\d+)/.exec(oneName)?.[1] as string;
    await page.fill("[data-filter]", `batch_size=${mb}`);
    await expect(page.locator(`tr[data-run-id="${plainRun}"]`).isVisible()).resolves.toBe(false);
    await expect(page.locator(`tr[data-tune-id="${TUNE_ID}"]`).isVisible()).resolves.toBe(true);
    const visibleTrials = await group.locator("tr.trial:not(.filtered-out) a.name").allTextContents();
    expect(visibleTrials.length).toBeGreaterThan(0);
    expect(visibleTrials.every((n) => n.includes(`batch_size=${mb} `))).toBe(true);
    await page.fill("[data-filter]", "no-such-thing-anywhere");
    await expect(page.locator("main").getAttribute("data-shown")).resolves.toBe("0");
    await page.fill("[data-filter]", "");
    await expect(page.locator(`tr[data-run-id="${plainRun}"]`).isVisible()).resolves.toBe(true);

    // auto-refresh: a run recorded after the page loaded appears without a reload
    const added = (await writeSyntheticRun(store, { steps: 5, warmup: 1 }, new Date())).id;
    await expect.poll(async () => page.locator(`tr[data-run-id="${added}"]`).count(), { timeout: scaled(12_000), interval: 200 }).toBe(1);
    expect(Number(await page.locator("main").getAttribute("data-refreshes"))).toBeGreaterThanOrEqual(1);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("draws the run's charts across the page width, with their legend and series", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
    await page.goto(`${dash.url}runs/${plainRun}`);
    const main = await page.locator("main").boundingBox();
    const chart = page.locator('svg[data-chart="throughput"]');
    const box = await chart.boundingBox();
    if (main === null || box === null) throw new Error("no layout");
    // main is 1280 px with 24 px padding each side: the chart takes (nearly) all of the rest
    expect(box.width).toBeGreaterThan(main.width - 48 - 20);
    expect(box.width).toBeGreaterThan(1100);
    // the SVG keeps its aspect ratio as it grows (viewBox 760 × 280)
    expect(box.height / box.width).toBeCloseTo(280 / 760, 2);
    const shot = pngSize(await chart.screenshot());
    expect(shot.width).toBeCloseTo(box.width, -1);
    const attrs = async (selector: string): Promise<(string | null)[]> =>
      Promise.all((await chart.locator(selector).all()).map((l) => l.getAttribute("data-series")));
    const legend = await attrs("g.legend-item");
    const series = await attrs("g.series");
    expect(legend).toEqual(series);
    expect(series.length).toBeGreaterThanOrEqual(1);
    for (const id of ["utilization", "memory", "throughput", "data_wait"]) {
      const b = await page.locator(`svg[data-chart="${id}"]`).boundingBox();
      expect(b?.width).toBeCloseTo(box.width, 0);
    }
    await page.close();
  });

  it("charts loss and throughput by step, by time on request, and overlays a second run with the knobs that differ", async () => {
    const other = (
      await writeSyntheticRun(store, { steps: 20, warmup: 2, batch: 64, knobs: { batch_size: 64, precision: "fp32" } }, new Date(Date.now() - 30_000))
    ).id;
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${dash.url}runs/${plainRun}`);
    const loss = page.locator('svg[data-chart="loss"]');
    await expect(loss.locator("g.series").count()).resolves.toBe(2); // the raw losses and the smoothed line
    await expect(page.locator('[data-axis="step"]').count()).resolves.toBe(1);
    const raw = loss.locator('g.series[data-series="loss"] circle');
    const dots = await raw.all();
    const lossValues = (await Promise.all(dots.map((d) => d.getAttribute("data-y")))).map(Number);
    const lossSteps = (await Promise.all(dots.map((d) => d.getAttribute("data-x")))).map(Number);
    expect(lossValues.length).toBe(30);
    expect(lossSteps[0]).toBeLessThan(lossSteps[lossSteps.length - 1] as number);
    expect(lossValues[0]).toBeGreaterThan(lossValues[lossValues.length - 1] as number);
    await expect(page.locator('svg[data-chart="throughput_steps"] text.axis-label').allTextContents()).resolves.toContain("step");

    await page.click('[data-axis] a[href$="x=time"]');
    await page.waitForURL("**?x=time");
    await expect(page.locator('svg[data-chart="throughput_steps"] text.axis-label').allTextContents()).resolves.toContain("time since start");

    await page.goto(`${dash.url}runs/${plainRun}?vs=${other}`);
    for (const id of ["loss", "throughput_steps"]) {
      const chart = page.locator(`svg[data-chart="${id}"]`);
      const names = id === "loss" ? ["loss", "loss, smoothed"] : ["samples/s"];
      await expect(chart.locator("g.series").count()).resolves.toBe(2 * names.length);
      const legend = await Promise.all((await chart.locator("g.legend-item").all()).map((l) => l.getAttribute("data-series")));
      expect(legend).toEqual([...names.map((n) => `${plainRun}: ${n}`), ...names.map((n) => `vs ${other}: ${n}`)]);
      const box = await chart.boundingBox();
      expect(box?.width).toBeGreaterThan(1100);
    }
    const diff = page.locator("[data-knob-diff]");
    await expect(diff.isVisible()).resolves.toBe(true);
    const [before, after] = await Promise.all([store.readRunMeta(other), store.readRunMeta(plainRun)]);
    const differing = Object.keys({ ...before.knobs, ...after.knobs }).filter((k) => before.knobs[k] !== after.knobs[k]);
    const rows = await diff.locator("tbody th").allTextContents();
    expect(differing).toEqual(expect.arrayContaining(["batch_size", "precision"]));
    for (const k of differing) expect(rows).toContain(k);
    await expect(diff.locator("tr", { hasText: "batch_size" }).locator("td").first().textContent()).resolves.toBe("64");
    expect((await page.goto(`${dash.url}runs/${plainRun}?vs=nope`))?.status()).toBe(404);
    await page.close();
  });

  it("ends a live run's page without the live badge or the still-running note", async () => {
    const live = await writeSyntheticRun(store, { running: true, steps: 6, warmup: 1 }, new Date(Date.now() - 2000));
    const page = await browser.newPage();
    await page.goto(`${dash.url}runs/${live.id}`);
    await expect(page.locator("[data-live-badge]").count()).resolves.toBe(1);
    await expect(page.locator("[data-live-note]").count()).resolves.toBe(1);
    await live.writer.finish({ cause: "ok", exit_code: 0, signal: null, message: "finished normally" }, null);
    await expect.poll(async () => page.locator("[data-status]").textContent(), { timeout: scaled(30_000), interval: 100 }).toMatch(/^ended: ok/);
    await expect(page.locator("[data-live-badge]").count()).resolves.toBe(0);
    await expect(page.locator("[data-live-note]").count()).resolves.toBe(0);
    await expect(page.locator(".live-badge").count()).resolves.toBe(0);
    await expect(page.locator("main").getAttribute("data-live")).resolves.toBe("ended");
    await page.close();
  });
});
