/**
 * PNG copies of SVG charts, made by screenshotting each SVG in a headless Chromium through
 * playwright-core. Optional at run time: without a Chromium (or without playwright-core, which is a
 * development dependency) reports still come out, with SVG charts and a note saying why no PNG.
 *
 * @module
 */
import { existsSync } from "node:fs";
import type * as PlaywrightCore from "playwright-core";
import type { Browser } from "playwright-core";

/**
 * Where brim looks for a Chromium when `BRIM_CHROMIUM` is not set; it never downloads one.
 *
 * @example
 * ```ts
 * CHROMIUM_PATHS.find((p) => existsSync(p));
 * ```
 */
export const CHROMIUM_PATHS: readonly string[] = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable"];

/**
 * Flags for a quiet headless Chromium that never reaches the network on its own.
 *
 * @example
 * ```ts
 * await chromium.launch({ executablePath: "/usr/bin/chromium", args: [...CHROMIUM_ARGS] });
 * ```
 */
export const CHROMIUM_ARGS: readonly string[] = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"];

/**
 * The Chromium executable to use: `BRIM_CHROMIUM` when set (empty = none), else the first of
 * {@link CHROMIUM_PATHS} that exists.
 *
 * @example
 * ```ts
 * findChromium(process.env); // "/usr/bin/chromium" or null
 * ```
 */
export function findChromium(env: NodeJS.ProcessEnv): string | null {
  const explicit = env.BRIM_CHROMIUM;
  if (explicit !== undefined) return explicit !== "" && existsSync(explicit) ? explicit : null;
  return CHROMIUM_PATHS.find((p) => existsSync(p)) ?? null;
}

/**
 * Renders SVG markup to PNG bytes.
 *
 * @example
 * ```ts
 * const png: Buffer = await renderer.render(svg);
 * ```
 */
export interface PngRenderer {
  render(svg: string): Promise<Buffer>;
  close(): Promise<void>;
}

/**
 * Starts a headless Chromium for PNG rendering, or says why it cannot.
 *
 * @example
 * ```ts
 * const r = await openPngRenderer(findChromium(process.env));
 * if ("renderer" in r) { await writeFile("chart.png", await r.renderer.render(svg)); await r.renderer.close(); }
 * else console.error(r.unavailable);
 * ```
 */
export async function openPngRenderer(executable: string | null, scale = 2): Promise<{ renderer: PngRenderer } | { unavailable: string }> {
  if (executable === null) return { unavailable: `no Chromium found (looked at ${CHROMIUM_PATHS.join(", ")}; set BRIM_CHROMIUM to use another)` };
  let playwright: typeof PlaywrightCore;
  try {
    playwright = await import("playwright-core");
  } catch {
    return { unavailable: "playwright-core is not installed (npm install playwright-core to get PNG charts)" };
  }
  let browser: Browser;
  try {
    browser = await playwright.chromium.launch({ executablePath: executable, headless: true, args: [...CHROMIUM_ARGS] });
  } catch (error) {
    return { unavailable: `Chromium at ${executable} did not start: ${(error as Error).message.split("\n")[0] ?? ""}` };
  }
  const context = await browser.newContext({ deviceScaleFactor: scale, javaScriptEnabled: false });
  const page = await context.newPage();
  return {
    renderer: {
      async render(svg: string): Promise<Buffer> {
        await page.setContent(`<!doctype html><html><body style="margin:0;background:#fff">${svg}</body></html>`);
        return page.locator("svg").first().screenshot({ type: "png", omitBackground: false });
      },
      async close(): Promise<void> {
        await browser.close();
      },
    },
  };
}
