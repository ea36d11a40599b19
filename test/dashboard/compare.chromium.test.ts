/**
 * The compare page in a real headless Chromium, as a TensorBoard user picks runs to overlay: tick two
 * runs (found by their --name and tag) in the picker, choose samples seen as the x axis, overlay;
 * smooth, switch the loss to log scale, hover a point; a run's page shows its name and tags. Skipped, with a message, only where
 * /usr/bin/chromium is missing (.ci/setup installs it).
 */
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDashboard, type Dashboard } from "../../src/dashboard/server.ts";
import { RunStore } from "../../src/record/store.ts";
import { smoothPoints } from "../../src/report/progress.ts";
import { CHROMIUM_ARGS } from "../helpers/chromium.ts";
import { writeSyntheticRun } from "../analyze/synthetic.ts";

const CHROMIUM = "/usr/bin/chromium";
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) console.warn(`skipping the compare page's Chromium test: ${CHROMIUM} is missing (.ci/setup installs Debian's chromium)`);

function seriesNames(page: Page, chart: string): Promise<string[]> {
  return page.evaluate<string[]>(`[...document.querySelectorAll('svg[data-chart="${chart}"] g.series')].map((g) => g.getAttribute("data-series"))`);
}

function plotted(page: Page, chart: string, series: string, axis: "x" | "y"): Promise<number[]> {
  return page.evaluate<number[]>(`[...document.querySelectorAll('svg[data-chart="${chart}"] g.series')]
    .filter((g) => g.getAttribute("data-series") === ${JSON.stringify(series)})
    .flatMap((g) => [...g.querySelectorAll("[data-${axis}]")])
    .flatMap((el) => el.getAttribute("data-${axis}").split(" ").map(Number))`);
}

describe.skipIf(!HAVE_CHROMIUM)("the compare page in headless Chromium", () => {
  let browser: Browser;
  let dash: Dashboard;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    const root = mkdtempSync(join(tmpdir(), "brim-dash-compare-"));
    const at = (s: number): Date => new Date(Date.now() - s * 1000);
    const labelled = (name: string, tags: Record<string, string>): RunStore => new RunStore(root, undefined, { name, tags });
    ids.small = (await writeSyntheticRun(labelled("bs32", { model: "mlp" }), { steps: 60, batch: 32, loss: (i) => 30 / (1 + i) }, at(300))).id;
    ids.large = (await writeSyntheticRun(labelled("bs128", { model: "mlp" }), { steps: 30, batch: 128, loss: (i) => 20 / (1 + 2 * i) }, at(200))).id;
    ids.other = (await writeSyntheticRun(labelled("cnn", { model: "cnn" }), { steps: 20, loss: () => 1 }, at(100))).id;
    dash = await startDashboard({ store: new RunStore(root), port: 0, token: null, pollMs: 100 });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  });

  afterAll(async () => {
    await browser?.close();
    await dash?.close();
  });

  it("picks two runs, overlays them by samples seen, smooths, switches to log scale, shows values on hover", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(dash.url);
    await page.click("a[data-compare-link]");
    await page.waitForURL(/\/compare$/);
    await expect(page.locator("[data-pick-more]").isVisible()).resolves.toBe(true);

    // the filter finds the runs by tag; tick both, samples seen on x
    await page.locator("form[data-run-picker] input[data-filter]").fill("model=mlp");
    await expect(page.locator(`tr[data-pick-row="${ids.other}"]`).isVisible()).resolves.toBe(false);
    await page.check(`input[data-pick="${ids.small}"]`);
    await page.check(`input[data-pick="${ids.large}"]`);
    await page.check('input[name="x"][value="samples"]');
    await page.click("button[data-overlay]");
    await page.waitForURL(/x=samples/);

    const small = `bs32 (${ids.small})`;
    const large = `bs128 (${ids.large})`;
    expect(await seriesNames(page, "loss")).toEqual([`${small}: loss`, `${small}: loss, smoothed`, `${large}: loss`, `${large}: loss, smoothed`]);
    expect(await seriesNames(page, "throughput_steps")).toEqual([`${small}: samples/s`, `${large}: samples/s`]);
    // samples seen: 60 steps of 32 and 30 steps of 128 both end at 3840 samples
    expect((await plotted(page, "loss", `${small}: loss`, "x")).at(-1)).toBe(60 * 32);
    expect((await plotted(page, "loss", `${large}: loss`, "x")).at(-1)).toBe(30 * 128);
    await expect(page.locator('svg[data-chart="loss"] text').filter({ hasText: "samples seen" }).count()).resolves.toBeGreaterThan(0);
    await expect(page.locator("[data-knob-diff]").textContent()).resolves.toContain("bs128");

    // smoothing follows the slider for each run
    await page.locator("input[data-smoothing]").fill("0.8");
    const xs = await plotted(page, "loss", `${large}: loss`, "x");
    const raw = await plotted(page, "loss", `${large}: loss`, "y");
    const smoothed = await plotted(page, "loss", `${large}: loss, smoothed`, "y");
    const expected = smoothPoints(
      xs.map((x, i) => [x, raw[i]!] as const),
      0.8,
    ).map(([, y]) => y);
    smoothed.forEach((y, i) => expect(y).toBeCloseTo(expected[i]!, 4));

    // log scale, and the runs stay picked
    const plot = page.locator('svg[data-chart="loss"] rect.plot');
    await page.click('a[data-loss-scale-link="log10"]');
    await page.waitForURL(/y=log/);
    await expect(plot.getAttribute("data-y-scale")).resolves.toBe("log10");
    await expect(page.locator(`input[data-pick="${ids.small}"]`).isChecked()).resolves.toBe(true);
    expect(await seriesNames(page, "loss")).toHaveLength(4);

    // hover: the pointer at 1920 samples seen shows both runs' values there
    const box = (await plot.boundingBox())!;
    const [x0, x1] = [Number(await plot.getAttribute("data-x-min")), Number(await plot.getAttribute("data-x-max"))];
    await page.mouse.move(box.x + ((1920 - x0) / (x1 - x0)) * box.width, box.y + box.height / 2);
    const tip = page.locator("[data-hover-tip]");
    await expect(tip.isVisible()).resolves.toBe(true);
    await expect(tip.locator(`[data-hover-series="${small}: loss"]`).count()).resolves.toBe(1);
    await expect(tip.locator(`[data-hover-series="${large}: loss"]`).count()).resolves.toBe(1);
    // a run's own page names it by its --name and lists its tags
    await page.goto(`${dash.url}runs/${ids.small}`);
    await expect(page.locator("h1").textContent()).resolves.toContain(`Run bs32 (${ids.small})`);
    await expect(page.locator("table.facts").first().textContent()).resolves.toContain("model=mlp");
    expect(errors).toEqual([]);
    await page.close();
  });

  it("refuses what is not a run id with a 404", async () => {
    const response = await fetch(`${dash.url}compare?run=nope`);
    expect(response.status).toBe(404);
  });
});
