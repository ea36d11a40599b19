/**
 * The dashboard end to end in a real headless Chromium: a run is being written (a writer appends
 * samples and steps on a timer), its page's charts and tiles follow it over server-sent events, the
 * tune page shows its curves, and the page notices the run's end. Skipped, with a message, only
 * where /usr/bin/chromium is missing (.ci/setup installs it).
 */
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDashboard, type Dashboard } from "../../src/dashboard/server.ts";
import { RunStore } from "../../src/record/store.ts";
import type { RunWriter } from "../../src/record/writer.ts";
import { CHROMIUM_ARGS } from "../helpers/chromium.ts";
import { GIB, TUNE_ID, writeSyntheticRun, writeSyntheticTune } from "../analyze/synthetic.ts";
import { scaled } from "../helpers/time.ts";

const CHROMIUM = "/usr/bin/chromium";
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) console.warn(`skipping the dashboard's Chromium test: ${CHROMIUM} is missing (.ci/setup installs Debian's chromium)`);

/** The values the utilization chart plots, read in the page (plain JavaScript: no DOM types here). */
const UTIL_VALUES = `[...document.querySelectorAll('svg[data-chart="utilization"] g.series[data-series="utilization"] polyline')]
  .flatMap((l) => l.getAttribute("data-y").split(" ").map(Number))`;

async function utilValues(page: Page): Promise<number[]> {
  return page.evaluate<number[]>(UTIL_VALUES);
}

describe.skipIf(!HAVE_CHROMIUM)("brim dashboard in headless Chromium", () => {
  let browser: Browser;
  let dash: Dashboard;
  let store: RunStore;
  let writer: RunWriter;
  let runId: string;
  let timer: NodeJS.Timeout | undefined;
  const appended: { util: number; step: number }[] = [];

  beforeAll(async () => {
    store = new RunStore(mkdtempSync(join(tmpdir(), "brim-dash-e2e-")));
    await writeSyntheticTune(store);
    const live = await writeSyntheticRun(store, { running: true, steps: 6, warmup: 1 }, new Date(Date.now() - 2000));
    writer = live.writer;
    runId = live.id;
    dash = await startDashboard({ store, port: 0, token: null, pollMs: 100, chartEveryMs: 150 });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  });

  afterAll(async () => {
    clearInterval(timer);
    await browser?.close();
    await dash?.close();
  });

  it("opens the tune page from the home page and shows its curves", async () => {
    const page = await browser.newPage();
    await page.goto(dash.url);
    await expect(page.locator(`tr[data-run-id="${runId}"] .live-badge`).textContent()).resolves.toBe("live");
    await page.click(`a[href="/tunes/${TUNE_ID}"]`);
    await page.waitForURL(`**/tunes/${TUNE_ID}`);
    const memory = page.locator('svg[data-chart="tune_memory"]');
    await expect(memory.isVisible()).resolves.toBe(true);
    await expect(memory.locator("g.series circle").count()).resolves.toBe(5);
    await expect(memory.locator('g.ref-line[data-label="cap 16.0 GiB"]').count()).resolves.toBe(1);
    const box = await memory.locator('g.series[data-series="fitted memory line"] polyline').boundingBox();
    expect(box?.width).toBeGreaterThan(100);
    await expect(page.locator('svg[data-chart="tune_throughput"] g.series').count()).resolves.toBe(4);
    await page.close();
  });

  it("follows a live run: charts and tiles update as samples arrive, then the end", async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(m.text());
    });
    await page.goto(`${dash.url}runs/${runId}`);
    await expect(page.locator("[data-status]").textContent()).resolves.toBe("live");
    const before = await utilValues(page);
    let t = Date.now() / 1000;
    let step = 100;
    timer = setInterval(() => {
      t += 0.5;
      step += 1;
      const util = 10 + (step % 80);
      appended.push({ util, step });
      writer.append({
        t,
        kind: "sample",
        tree: { pids: 1, rss_bytes: 2 * GIB, cpu_percent: 100, gpu_bytes: 10 * GIB + step * 2 ** 20 },
        gpus: [
          { index: 0, used_bytes: 11 * GIB, total_bytes: 80 * GIB, util, mem_util: 30, sm_activity: null, power_w: 200, sm_clock_mhz: 1410, throttle: [] },
        ],
        host: { mem_available_bytes: 100 * GIB, cpu_percent: 25 },
      });
      writer.append({
        t,
        kind: "step",
        pid: 4242,
        step,
        samples: 32,
        wait_s: 0.05,
        compute_s: 0.2,
        warmup: false,
        micro_batch: 32,
        accumulation: 1,
        loss: 1,
        mem: null,
      });
      writer.flush();
    }, 120);
    // Polling through locators: the page's CSP (rightly) forbids the string evaluation waitForFunction uses.
    await expect
      .poll(async () => Number((await page.locator("main").getAttribute("data-updates")) ?? 0), { timeout: scaled(15000), interval: 100 })
      .toBeGreaterThanOrEqual(3);
    // updates also count steps and charts: the samples may trail them by a poll
    await expect
      .poll(async () => Number((await page.locator("main").getAttribute("data-samples")) ?? 0), { timeout: scaled(15000), interval: 100 })
      .toBeGreaterThanOrEqual(3);
    const after = await utilValues(page);
    expect(after.length).toBeGreaterThan(before.length);
    const newest = after.slice(before.length);
    expect(newest).toEqual(appended.slice(0, newest.length).map((a) => a.util));
    await expect
      .poll(async () => Number(await page.locator('[data-tile="step"] .value').textContent()), { timeout: scaled(10000), interval: 100 })
      .toBeGreaterThanOrEqual(appended[2]?.step ?? 0);
    clearInterval(timer);
    await writer.finish({ cause: "ok", exit_code: 0, signal: null, message: "finished normally" }, null);
    await expect.poll(async () => page.locator("[data-status]").textContent(), { timeout: scaled(10000), interval: 100 }).toMatch(/^ended: ok/);
    const final = await utilValues(page);
    expect(final.slice(before.length)).toEqual(appended.map((a) => a.util));
    expect(errors).toEqual([]);
    await page.close();
  });
});
