/**
 * PNG copies of SVG charts, rasterized in-process by resvg (@resvg/resvg-js, a prebuilt native
 * binding): no browser. Text needs a font on the machine; without one, or where the binding does not
 * load, reports still come out with SVG charts and a note saying why no PNG.
 *
 * @module
 */
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import type { Resvg as ResvgClass } from "@resvg/resvg-js";

/**
 * Where brim looks for fonts (recursively) when `BRIM_FONT_DIRS` (colon-separated) is not set.
 *
 * @example
 * ```ts
 * FONT_DIRS.filter((d) => existsSync(d));
 * ```
 */
export const FONT_DIRS: readonly string[] = ["/usr/share/fonts", "/usr/local/share/fonts", join(homedir(), ".local/share/fonts"), join(homedir(), ".fonts")];

// Sans faces the charts' font-family list names or falls back to, best first.
const PREFERRED = [
  /^DejaVuSans(-Bold)?\.ttf$/,
  /^LiberationSans-(Regular|Bold)\.ttf$/,
  /^NotoSans-(Regular|Bold)\.[ot]tf$/,
  /^Roboto-(Regular|Bold)\.ttf$/,
  /^FreeSans(Bold)?\.[ot]tf$/,
  /^(Arial|Helvetica)\.[ot]tf$/i,
];
const FONT_FILE = /\.(ttf|otf|ttc)$/i;
const SCAN_LIMIT = 5000;

/**
 * The font files PNG charts are drawn with: the preferred sans faces found under `dirs`, else up to
 * 20 fonts of any kind; empty when the machine has none.
 *
 * @example
 * ```ts
 * findFonts(["/usr/share/fonts"]); // ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", ...]
 * ```
 */
export function findFonts(dirs: readonly string[]): string[] {
  const all: string[] = [];
  const walk = (dir: string, depth: number): void => {
    if (depth > 6 || all.length >= SCAN_LIMIT) return;
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p, depth + 1);
      else if (FONT_FILE.test(e.name)) all.push(p);
    }
  };
  for (const d of dirs) if (existsSync(d)) walk(d, 0);
  all.sort();
  const base = (p: string) => p.slice(p.lastIndexOf("/") + 1);
  for (const re of PREFERRED) {
    const hit = all.filter((p) => re.test(base(p)));
    if (hit.length > 0) return hit;
  }
  return all.slice(0, 20);
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
 * Where the fonts come from: `BRIM_FONT_DIRS` (colon-separated) when set, else {@link FONT_DIRS}.
 *
 * @example
 * ```ts
 * fontDirs({ BRIM_FONT_DIRS: "/opt/fonts" }); // ["/opt/fonts"]
 * ```
 */
export function fontDirs(env: NodeJS.ProcessEnv): string[] {
  const explicit = env.BRIM_FONT_DIRS;
  return explicit !== undefined ? explicit.split(":").filter((d) => d !== "") : [...FONT_DIRS];
}

/**
 * Opens the resvg rasterizer at `scale` × the SVG's size on a white background, or says why it cannot.
 *
 * @example
 * ```ts
 * const r = await openPngRenderer({ env: process.env });
 * if ("renderer" in r) { await writeFile("chart.png", await r.renderer.render(svg)); await r.renderer.close(); }
 * else console.error(r.unavailable);
 * ```
 */
export async function openPngRenderer(options: { env?: NodeJS.ProcessEnv; scale?: number } = {}): Promise<{ renderer: PngRenderer } | { unavailable: string }> {
  const dirs = fontDirs(options.env ?? process.env);
  const fonts = findFonts(dirs);
  if (fonts.length === 0)
    return { unavailable: `no font found under ${dirs.join(", ") || "(no folder)"} (install one, e.g. Debian's fonts-dejavu-core, or set BRIM_FONT_DIRS)` };
  let Resvg: typeof ResvgClass;
  try {
    ({ Resvg } = await import("@resvg/resvg-js"));
  } catch (error) {
    return { unavailable: `the SVG rasterizer @resvg/resvg-js did not load: ${(error as Error).message.split("\n")[0] ?? ""}` };
  }
  const family = /DejaVuSans/.test(fonts[0] ?? "") ? "DejaVu Sans" : undefined;
  const scale = options.scale ?? 2;
  return {
    renderer: {
      render(svg: string): Promise<Buffer> {
        const r = new Resvg(svg, {
          background: "#ffffff",
          fitTo: { mode: "zoom", value: scale },
          font: { loadSystemFonts: false, fontFiles: fonts, ...(family !== undefined ? { defaultFontFamily: family, sansSerifFamily: family } : {}) },
          logLevel: "off",
        });
        return Promise.resolve(r.render().asPng());
      },
      close(): Promise<void> {
        return Promise.resolve();
      },
    },
  };
}
