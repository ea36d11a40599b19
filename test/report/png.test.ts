// PNG charts without a browser: resvg rasterizes the report's SVG charts in-process. The PNGs are
// decoded here and their pixels checked: white background, the title's text drawn in dark ink (so a
// font was found), each series' colour on the plot.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { inflateSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { RunStore } from "../../src/record/store.ts";
import { findFonts, openPngRenderer } from "../../src/report/png.ts";
import { writeReport } from "../../src/report/write.ts";

const FIXTURES = fileURLToPath(new URL("../fixtures/stores/", import.meta.url));

interface Image {
  width: number;
  height: number;
  pixel(x: number, y: number): [number, number, number, number];
}

/** A minimal decoder for 8-bit RGBA, non-interlaced PNGs (what resvg writes). */
function decodePng(bytes: Buffer): Image {
  expect(bytes.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  let off = 8;
  let width = 0;
  let height = 0;
  const idat: Buffer[] = [];
  while (off < bytes.length) {
    const len = bytes.readUInt32BE(off);
    const type = bytes.toString("ascii", off + 4, off + 8);
    const data = bytes.subarray(off + 8, off + 8 + len);
    if (type === "IHDR") {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      expect([data[8], data[9], data[12]]).toEqual([8, 6, 0]);
    } else if (type === "IDAT") idat.push(data);
    off += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * 4;
  const out = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)] as number;
    for (let i = 0; i < stride; i++) {
      const x = raw[y * (stride + 1) + 1 + i] as number;
      const a = i >= 4 ? (out[y * stride + i - 4] as number) : 0;
      const b = y > 0 ? (out[(y - 1) * stride + i] as number) : 0;
      const c = y > 0 && i >= 4 ? (out[(y - 1) * stride + i - 4] as number) : 0;
      let v = x;
      if (filter === 1) v = x + a;
      else if (filter === 2) v = x + b;
      else if (filter === 3) v = x + ((a + b) >> 1);
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        v = x + (pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
      }
      out[y * stride + i] = v & 0xff;
    }
  }
  return { width, height, pixel: (x, y) => [...out.subarray(y * stride + x * 4, y * stride + x * 4 + 4)] as [number, number, number, number] };
}

function count(img: Image, box: { x0: number; y0: number; x1: number; y1: number }, test: (p: [number, number, number, number]) => boolean): number {
  let n = 0;
  for (let y = box.y0; y < box.y1; y++) for (let x = box.x0; x < box.x1; x++) if (test(img.pixel(x, y))) n++;
  return n;
}

describe("PNG charts (resvg, no browser)", () => {
  it("finds this machine's sans font", () => {
    expect(findFonts(["/usr/share/fonts"]).length).toBeGreaterThan(0);
  });

  it("rasterizes an SVG at 2× with text and shapes", async () => {
    const opened = await openPngRenderer({ env: {} });
    if (!("renderer" in opened)) throw new Error(opened.unavailable);
    const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="200" height="60" font-family="sans-serif"><text x="4" y="30" font-size="24" fill="#000">brim</text><rect x="150" y="10" width="40" height="40" fill="#ff0000"/></svg>`;
    const img = decodePng(await opened.renderer.render(svg));
    await opened.renderer.close();
    expect([img.width, img.height]).toEqual([400, 120]);
    expect(img.pixel(0, 119)).toEqual([255, 255, 255, 255]);
    expect(img.pixel(340, 60)).toEqual([255, 0, 0, 255]);
    expect(count(img, { x0: 0, y0: 0, x1: 140, y1: 120 }, ([r, g, b]) => r + g + b < 200)).toBeGreaterThan(200);
  });

  it("writes a recorded run's report with PNG charts whose pixels carry the title and the series", async () => {
    const store = new RunStore(join(FIXTURES, "cnn-lstm"));
    const out = mkdtempSync(join(tmpdir(), "brim-report-png-"));
    const result = await writeReport(store, "latest", { out, env: {} });
    expect(result.png.note).toBeNull();
    expect(result.png.written).toBe(result.model.charts.length);
    for (const chart of result.model.charts) {
      const svg = readFileSync(join(out, "charts", `${chart.id}.svg`), "utf8");
      const [w, h] = [Number(/width="(\d+)"/.exec(svg)?.[1]), Number(/height="(\d+)"/.exec(svg)?.[1])];
      const img = decodePng(readFileSync(join(out, "charts", `${chart.id}.png`)));
      expect([img.width, img.height]).toEqual([w * 2, h * 2]);
      // the title (13 px bold at the top left) is dark text
      expect(
        count(img, { x0: 0, y0: 0, x1: Math.min(img.width, 600), y1: 48 }, ([r, g, b]) => r + g + b < 150),
        chart.id,
      ).toBeGreaterThan(100);
      // the first series' stroke colour appears in the plot
      const color = /<g class="series"[^>]*>\s*<(?:polyline|circle|rect|path)[^>]*(?:stroke|fill)="#([0-9a-fA-F]{6})"/.exec(svg)?.[1];
      if (/data-count="[1-9]/.test(svg)) {
        if (color === undefined) throw new Error(`${chart.id}: no series colour in the SVG`);
        const [cr, cg, cb] = [0, 2, 4].map((i) => parseInt(color.slice(i, i + 2), 16)) as [number, number, number];
        expect(
          count(img, { x0: 0, y0: 90, x1: img.width, y1: img.height }, ([r, g, b]) => Math.abs(r - cr) + Math.abs(g - cg) + Math.abs(b - cb) < 30),
          chart.id,
        ).toBeGreaterThan(20);
      }
    }
    expect(readFileSync(join(out, "report.md"), "utf8")).toContain("(charts/throughput.png)");
  });
});
