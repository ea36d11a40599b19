/**
 * The run page's loss chart in a real headless Chromium, as TensorBoard users work with one: a
 * smoothing slider (kept across reloads), log/linear, values under the pointer, and another run
 * overlaid; and a tune's page, where the winner's loss is read beside yours. Skipped, with a
 * message, only where /usr/bin/chromium is missing (.ci/setup installs it).
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
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
if (!HAVE_CHROMIUM) console.warn(`skipping the loss chart's Chromium test: ${CHROMIUM} is missing (.ci/setup installs Debian's chromium)`);

/** A series' plotted values, read in the page (plain JavaScript: no DOM types here). */
function plotted(page: Page, series: string, axis: "x" | "y"): Promise<number[]> {
  return page.evaluate<number[]>(`[...document.querySelectorAll('svg[data-chart="loss"] g.series')]
    .filter((g) => g.getAttribute("data-series") === ${JSON.stringify(series)})
    .flatMap((g) => [...g.querySelectorAll("[data-${axis}]")])
    .flatMap((el) => el.getAttribute("data-${axis}").split(" ").map(Number))`);
}

const SERIES_NAMES = `[...document.querySelectorAll('svg[data-chart="loss"] g.series')].map((g) => g.getAttribute("data-series"))`;

describe.skipIf(!HAVE_CHROMIUM)("the loss chart in headless Chromium", () => {
  let browser: Browser;
  let dash: Dashboard;
  let runId: string;
  let otherId: string;
  let tuneId: string;
  const parityFixture = new URL("../fixtures/tune-parity/batch-changed.json", import.meta.url);

  beforeAll(async () => {
    const store = new RunStore(mkdtempSync(join(tmpdir(), "brim-dash-loss-")));
    // a real tune whose winner changes the effective batch 16 → 64, as brim tune wrote it
    tuneId = (JSON.parse(readFileSync(parityFixture, "utf8")) as { id: string }).id;
    mkdirSync(join(store.root, "tunes", tuneId), { recursive: true });
    cpSync(parityFixture, join(store.root, "tunes", tuneId, "tune.json"));
    // a step-0 spike and a fall over decades; noise so that smoothing shows
    otherId = (await writeSyntheticRun(store, { steps: 80, loss: (i) => 3 / (1 + i / 10) }, new Date(Date.now() - 60_000))).id;
    runId = (await writeSyntheticRun(store, { steps: 80, loss: (i) => (i === 0 ? 40 : (2 / (1 + i)) * (i % 2 === 0 ? 1.3 : 0.7)) }, new Date())).id;
    dash = await startDashboard({ store, port: 0, token: null, pollMs: 100 });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  });

  afterAll(async () => {
    await browser?.close();
    await dash?.close();
  });

  it("smooths with the slider, keeps the choice, switches log/linear, shows values on hover, overlays a run", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`${dash.url}runs/${runId}`);
    const plot = page.locator('svg[data-chart="loss"] rect.plot');
    await expect(plot.getAttribute("data-y-scale")).resolves.toBe("log10"); // 40 → ~0.01: decades
    const xs = await plotted(page, "loss", "x");
    const raw = await plotted(page, "loss", "y");
    expect(xs.length).toBe(80);

    // the slider: the smoothed line follows, de-biased, as the report's smoothPoints computes it
    await page.locator("input[data-smoothing]").fill("0.9");
    await expect(page.locator("[data-smoothing-value]").textContent()).resolves.toBe("0.90");
    const smoothed = await plotted(page, "loss, smoothed", "y");
    const expected = smoothPoints(
      xs.map((x, i) => [x, raw[i]!] as const),
      0.9,
    ).map(([, y]) => y);
    expect(smoothed.length).toBe(80);
    smoothed.forEach((y, i) => expect(y).toBeCloseTo(expected[i]!, 4));
    await page.reload();
    await expect(page.locator("input[data-smoothing]").inputValue()).resolves.toBe("0.9");
    const again = await plotted(page, "loss, smoothed", "y");
    again.forEach((y, i) => expect(y).toBeCloseTo(expected[i]!, 4));

    // log → linear and back to automatic
    await page.click('a[data-loss-scale-link="linear"]');
    await page.waitForURL(/y=linear/);
    await expect(plot.getAttribute("data-y-scale")).resolves.toBe("linear");
    await page.click('a[data-loss-scale-link="auto"]');
    await expect(plot.getAttribute("data-y-scale")).resolves.toBe("log10");

    // hover: the pointer over step 20 shows step 20's raw and smoothed loss
    const box = (await plot.boundingBox())!;
    const [x0, x1] = [Number(await plot.getAttribute("data-x-min")), Number(await plot.getAttribute("data-x-max"))];
    await page.mouse.move(box.x + ((20 - x0) / (x1 - x0)) * box.width, box.y + box.height / 2);
    const tip = page.locator("[data-hover-tip]");
    await expect(tip.isVisible()).resolves.toBe(true);
    await expect(tip.locator("[data-hover-x]").getAttribute("data-hover-x")).resolves.toBe("20");
    const value = Number(await tip.locator('[data-hover-series="loss"]').getAttribute("data-hover-value"));
    expect(value).toBeCloseTo(raw[xs.indexOf(20)]!, 6);
    await expect(tip.locator('[data-hover-series="loss, smoothed"]').count()).resolves.toBe(1);
    await expect(page.locator('svg[data-chart="loss"] line[data-hover-line]').count()).resolves.toBe(1);
    await page.mouse.move(2, 2);
    await expect(tip.isVisible()).resolves.toBe(false);

    // another run overlaid: both runs' raw and smoothed series, each smoothed by the slider
    await page.goto(`${dash.url}runs/${runId}?vs=${otherId}`);
    const names = await page.evaluate<string[]>(SERIES_NAMES);
    expect(names).toEqual([`${runId}: loss`, `${runId}: loss, smoothed`, `vs ${otherId}: loss`, `vs ${otherId}: loss, smoothed`]);
    const otherRaw = await plotted(page, `vs ${otherId}: loss`, "y");
    const otherSmoothed = await plotted(page, `vs ${otherId}: loss, smoothed`, "y");
    expect(otherSmoothed.at(-1)).toBeCloseTo(
      smoothPoints(
        otherRaw.map((y, i) => [i, y] as const),
        0.9,
      ).at(-1)![1],
      4,
    );
    expect(errors).toEqual([]);
    await page.close();
  });

  it("reads both runs' losses at the samples seen under the pointer on a tune's page", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`${dash.url}tunes/${tuneId}`);
    const plot = page.locator('svg[data-chart="tune_loss"] rect.plot');
    await plot.scrollIntoViewIfNeeded(); // below the facts: the mouse moves within the viewport
    const box = (await plot.boundingBox())!;
    const [x0, x1] = [Number(await plot.getAttribute("data-x-min")), Number(await plot.getAttribute("data-x-max"))];
    await page.mouse.move(box.x + ((256 - x0) / (x1 - x0)) * box.width, box.y + box.height / 2);
    const tip = page.locator("[data-hover-tip]");
    await expect(tip.locator("[data-hover-x]").getAttribute("data-hover-x")).resolves.toBe("256");
    const { parity } = JSON.parse(readFileSync(parityFixture, "utf8")) as { parity: { baseline_losses: number[]; winner_losses: number[] } };
    // 256 samples: your 16th step of 16, the winner's 4th of 64
    const at = async (series: string): Promise<number> => Number(await tip.locator(`[data-hover-series="${series}"]`).getAttribute("data-hover-value"));
    expect(await at("yours (trial 2)")).toBeCloseTo(parity.baseline_losses[15]!, 5);
    expect(await at("winner (trial 3)")).toBeCloseTo(parity.winner_losses[3]!, 5);
    expect(errors).toEqual([]);
    await page.close();
  });
});
