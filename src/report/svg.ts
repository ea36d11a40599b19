/**
 * Line and point charts as standalone SVG, with no dependencies: the same markup goes into HTML
 * reports, the dashboard, and PNG screenshots. Every series carries its plotted values in `data-x` /
 * `data-y` attributes, and the plot area its domain, so a reader (or a test) can check what is drawn.
 *
 * @module
 */

import { formatAxisValue, logTicks, niceTicks, type AxisKind } from "./ticks.ts";

export { formatAxisValue, niceTicks, type AxisKind };

/**
 * A point; `y: null` breaks a line (nothing measured there).
 *
 * @example
 * ```ts
 * const p: Point = [12.5, 97]; // x = 12.5 s, y = 97 %
 * ```
 */
export type Point = readonly [x: number, y: number | null];

/**
 * One series of a chart.
 *
 * @example
 * ```ts
 * const s: Series = { name: "GPU 0 utilization", points: [[0, 40], [1, 95]] };
 * ```
 */
export interface Series {
  name: string;
  points: readonly Point[];
  color?: string;
  /** `line` (default), `points` (markers only), `line+points`, `dashed`, `cross` (✕ markers, e.g. failed trials) */
  style?: "line" | "points" | "line+points" | "dashed" | "cross";
}

/**
 * A horizontal (`y`) or vertical (`x`) reference line, e.g. the memory cap.
 *
 * @example
 * ```ts
 * const cap: RefLine = { axis: "y", value: 12 * 2 ** 30, label: "cap 12.0 GiB" };
 * ```
 */
export interface RefLine {
  axis: "x" | "y";
  value: number;
  label: string;
  color?: string;
}

/**
 * One axis. `time` is seconds since a start, labelled as s / min / h.
 *
 * @example
 * ```ts
 * const y: Axis = { label: "memory", kind: "bytes", min: 0 };
 * ```
 */
export interface Axis {
  label: string;
  kind?: AxisKind;
  min?: number;
  max?: number;
  /** `log2` for micro-batches (powers of two sit evenly), `log10` for a loss spanning decades */
  scale?: "linear" | "log2" | "log10";
}

/**
 * A horizontal band from `low` to `high` on the y axis, e.g. the spread of a tune's confirmed runs.
 *
 * @example
 * ```ts
 * const noise: Band = { low: 380, high: 412, label: "baseline, 4 interleaved runs" };
 * ```
 */
export interface Band {
  low: number;
  high: number;
  label: string;
  color?: string;
}

/**
 * A whole chart.
 *
 * @example
 * ```ts
 * const spec: ChartSpec = { id: "util", title: "GPU utilization", x: { label: "time", kind: "time" }, y: { label: "%", kind: "percent" }, series: [] };
 * ```
 */
export interface ChartSpec {
  id: string;
  title: string;
  x: Axis;
  y: Axis;
  series: readonly Series[];
  lines?: readonly RefLine[];
  bands?: readonly Band[];
  width?: number;
  height?: number;
  /** shown in the plot area when no series has a point */
  empty?: string;
  /** most points drawn per series; longer series keep each bucket's min and max */
  maxPoints?: number;
}

/**
 * The colours series get in order (colour-blind safe, after Okabe & Ito).
 *
 * @example
 * ```ts
 * const color = PALETTE[index % PALETTE.length];
 * ```
 */
export const PALETTE: readonly string[] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];

const MARGIN = { left: 68, right: 18, top: 50, bottom: 42 };
/** A white outline under reference-line labels, so they stay readable over the data. */
const HALO = ` stroke="#ffffff" stroke-width="3" stroke-linejoin="round" paint-order="stroke"`;

/**
 * Escapes text for XML and HTML.
 *
 * @example
 * ```ts
 * escapeXml('a < b & "c"'); // "a &lt; b &amp; &quot;c&quot;"
 * ```
 */
export function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

/**
 * Thins a series to at most `max` points, keeping the lowest and highest point of each x-bucket so
 * spikes and dips survive. Line breaks (`null`) are kept.
 *
 * @example
 * ```ts
 * downsample(Array.from({ length: 10000 }, (_, i) => [i, i % 7] as const), 500).length <= 500; // true
 * ```
 */
export function downsample(points: readonly Point[], max: number): Point[] {
  if (points.length <= max) return [...points];
  const buckets = Math.max(1, Math.floor(max / 2));
  const first = points[0]?.[0] ?? 0;
  const last = points[points.length - 1]?.[0] ?? first;
  const width = (last - first) / buckets || 1;
  const out: Point[] = [];
  let bucket = -1;
  let lo: Point | null = null;
  let hi: Point | null = null;
  let gap = false;
  const flush = (): void => {
    if (lo !== null && hi !== null) {
      if (lo === hi) out.push(lo);
      else out.push(...(lo[0] <= hi[0] ? [lo, hi] : [hi, lo]));
    }
    if (gap) out.push([out[out.length - 1]?.[0] ?? first, null]);
    lo = hi = null;
    gap = false;
  };
  for (const p of points) {
    const b = Math.min(buckets - 1, Math.floor((p[0] - first) / width));
    if (b !== bucket) {
      flush();
      bucket = b;
    }
    if (p[1] === null) {
      gap = true;
      continue;
    }
    if (lo === null || p[1] < (lo[1] as number)) lo = p;
    if (hi === null || p[1] > (hi[1] as number)) hi = p;
  }
  flush();
  return out;
}

function num(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(2).replace(/\.?0+$/, "");
}

function raw(value: number): string {
  return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(6)));
}

/**
 * Renders a chart as one `<svg>` element (no XML prolog, so it can be inlined in HTML; add
 * {@link svgDocument} for a standalone file).
 *
 * @example
 * ```ts
 * const svg = renderChart({
 *   id: "util", title: "GPU utilization", x: { label: "time", kind: "time" }, y: { label: "%", kind: "percent", min: 0, max: 100 },
 *   series: [{ name: "GPU 0", points: [[0, 40], [1, 95], [2, 97]] }],
 * });
 * ```
 */
export function renderChart(spec: ChartSpec): string {
  const series = spec.series.map((s, i) => ({
    ...s,
    color: s.color ?? PALETTE[i % PALETTE.length] ?? "#000",
    points: downsample(s.points, spec.maxPoints ?? 1200),
  }));
  const legendAt = legendLayout(series, spec.width ?? 760);
  const plot = plotOf(spec, series, new Set(legendAt.map((at) => at.y)).size || 1);
  const { width, height, top, pw, ph, xDomain, yDomain } = plot;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" class="brim-chart" data-chart="${escapeXml(spec.id)}" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-labelledby="${escapeXml(spec.id)}-title" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif" font-size="11">`,
  );
  out.push(`<title id="${escapeXml(spec.id)}-title">${escapeXml(spec.title)}</title>`);
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="${MARGIN.left}" y="18" font-size="13" font-weight="600" fill="#111">${escapeXml(spec.title)}</text>`);
  legend(out, series, legendAt);
  out.push(
    `<rect class="plot" x="${MARGIN.left}" y="${top}" width="${pw}" height="${ph}" fill="#fafafa" stroke="#d0d0d0" data-x-min="${raw(xDomain[0])}" data-x-max="${raw(xDomain[1])}" data-y-min="${raw(yDomain[0])}" data-y-max="${raw(yDomain[1])}" data-x-scale="${spec.x.scale ?? "linear"}" data-y-scale="${spec.y.scale ?? "linear"}" data-x-label="${escapeXml(spec.x.label)}"/>`,
  );
  axes(out, spec, plot);
  bands(out, spec.bands ?? [], plot);
  refLines(out, spec.lines ?? [], plot);
  const clip = `${spec.id}-clip`.replace(/[^A-Za-z0-9_-]/g, "_");
  out.push(`<clipPath id="${clip}"><rect x="${MARGIN.left - 4}" y="${top - 4}" width="${pw + 8}" height="${ph + 8}"/></clipPath>`);
  out.push(`<g class="series-group" clip-path="url(#${clip})">`);
  let drawn = 0;
  for (const s of series) drawn += seriesMarks(out, s, plot);
  out.push(`</g>`);
  if (drawn === 0) {
    out.push(
      `<text class="empty" x="${num(MARGIN.left + pw / 2)}" y="${num(top + ph / 2)}" text-anchor="middle" fill="#777">${escapeXml(spec.empty ?? "nothing recorded")}</text>`,
    );
  }
  out.push(`</svg>`);
  return out.join("\n");
}

type DrawnSeries = Series & { color: string };

/** Where a chart's values land: its size, domains, ticks and the maps from values to pixels. */
interface Plot {
  width: number;
  height: number;
  /** the plot's top edge (below the title and the legend) */
  top: number;
  pw: number;
  ph: number;
  xDomain: [number, number];
  yDomain: [number, number];
  xTicks: number[];
  yTicks: number[];
  tx: (v: number) => number;
  ty: (v: number) => number;
}

function plotOf(spec: ChartSpec, series: readonly DrawnSeries[], legendRows = 1): Plot {
  const width = spec.width ?? 760;
  // legend rows past the first make the chart taller, not its plot smaller
  const top = MARGIN.top + (legendRows - 1) * LEGEND_ROW;
  const height = (spec.height ?? 280) + top - MARGIN.top;
  const pw = width - MARGIN.left - MARGIN.right;
  const ph = height - top - MARGIN.bottom;
  const xs: number[] = [];
  const ys: number[] = [];
  for (const s of series) {
    for (const [x, y] of s.points) {
      xs.push(x);
      if (y !== null) ys.push(y);
    }
  }
  for (const l of spec.lines ?? []) (l.axis === "x" ? xs : ys).push(l.value);
  for (const b of spec.bands ?? []) ys.push(b.low, b.high);
  const extent = (values: number[], axis: Axis): [number, number] => {
    let lo = axis.min ?? Infinity;
    let hi = axis.max ?? -Infinity;
    if (axis.min === undefined) for (const v of values) lo = Math.min(lo, v);
    if (axis.max === undefined) for (const v of values) hi = Math.max(hi, v);
    if (!Number.isFinite(lo)) lo = 0;
    if (!Number.isFinite(hi)) hi = lo + 1;
    return [lo, hi];
  };
  const [x0, x1] = extent(xs, spec.x);
  const [y0, y1] = extent(ys, spec.y);
  const base = (scale: Axis["scale"]): number => (scale === "log2" ? 2 : scale === "log10" ? 10 : 0);
  const xt = base(spec.x.scale) ? logTicks(x0, x1, base(spec.x.scale)) : niceTicks(x0, x1, spec.x.kind ?? "number", 6);
  const yt = base(spec.y.scale) ? logTicks(y0, y1, base(spec.y.scale)) : niceTicks(y0, y1, spec.y.kind ?? "number", 5);
  const xDomain: [number, number] = spec.x.max !== undefined && spec.x.min !== undefined ? [spec.x.min, spec.x.max] : [xt.min, xt.max];
  const yDomain: [number, number] = spec.y.max !== undefined && spec.y.min !== undefined ? [spec.y.min, spec.y.max] : [yt.min, yt.max];
  const along = (v: number, [a, b]: [number, number], scale: Axis["scale"]): number =>
    base(scale) ? (Math.log(Math.max(v, 1e-12)) - Math.log(a)) / (Math.log(b) - Math.log(a) || 1) : (v - a) / (b - a || 1);
  return {
    width,
    height,
    top,
    pw,
    ph,
    xDomain,
    yDomain,
    xTicks: xt.ticks,
    yTicks: yt.ticks,
    tx: (v) => MARGIN.left + along(v, xDomain, spec.x.scale) * pw,
    ty: (v) => top + ph - along(v, yDomain, spec.y.scale) * ph,
  };
}

/** Where each legend item goes: left to right, onto a new row where the next would run past the chart's right edge. */
function legendLayout(series: readonly DrawnSeries[], width: number): { x: number; y: number }[] {
  let lx = MARGIN.left;
  let y = 32;
  return series.map((s) => {
    const w = 26 + s.name.length * 6.2;
    if (lx > MARGIN.left && lx + w - 8 > width - MARGIN.right) {
      lx = MARGIN.left;
      y += LEGEND_ROW;
    }
    const at = { x: lx, y };
    lx += w;
    return at;
  });
}

/** The height of one row of the legend; rows past the first push the plot down by as much. */
const LEGEND_ROW = 16;

function legend(out: string[], series: readonly DrawnSeries[], at: readonly { x: number; y: number }[]): void {
  series.forEach((s, i) => {
    const { x: lx, y } = at[i] ?? { x: MARGIN.left, y: 32 };
    const dash = s.style === "dashed" ? ` stroke-dasharray="5 3"` : "";
    out.push(`<g class="legend-item" data-series="${escapeXml(s.name)}">`);
    if (s.style === "points" || s.style === "cross") out.push(`<circle cx="${num(lx + 6)}" cy="${y}" r="3.5" fill="${s.color}"/>`);
    else out.push(`<line x1="${num(lx)}" y1="${y}" x2="${num(lx + 14)}" y2="${y}" stroke="${s.color}" stroke-width="2.5"${dash}/>`);
    out.push(`<text x="${num(lx + 18)}" y="${y + 4}" fill="#333">${escapeXml(s.name)}</text></g>`);
  });
}

function axes(out: string[], spec: ChartSpec, plot: Plot): void {
  const { height, top, pw, ph, xDomain, yDomain, tx, ty } = plot;
  const xSpan = xDomain[1] - xDomain[0];
  const ySpan = Math.max(Math.abs(yDomain[0]), Math.abs(yDomain[1]));
  out.push(`<g class="y-axis">`);
  for (const v of plot.yTicks) {
    if (v < yDomain[0] - 1e-9 || v > yDomain[1] + 1e-9) continue;
    const y = num(ty(v));
    out.push(`<line x1="${MARGIN.left}" y1="${y}" x2="${MARGIN.left + pw}" y2="${y}" stroke="#e6e6e6"/>`);
    out.push(
      `<text class="tick" x="${MARGIN.left - 6}" y="${y}" dy="0.32em" text-anchor="end" fill="#555">${escapeXml(formatAxisValue(v, spec.y.kind ?? "number", ySpan))}</text>`,
    );
  }
  out.push(
    `<text class="axis-label" transform="translate(14 ${num(top + ph / 2)}) rotate(-90)" text-anchor="middle" fill="#333">${escapeXml(spec.y.label)}</text></g>`,
  );
  out.push(`<g class="x-axis">`);
  for (const v of plot.xTicks) {
    if (v < xDomain[0] - 1e-9 || v > xDomain[1] + 1e-9) continue;
    const x = num(tx(v));
    out.push(`<line x1="${x}" y1="${top + ph}" x2="${x}" y2="${top + ph + 4}" stroke="#999"/>`);
    out.push(
      `<text class="tick" x="${x}" y="${top + ph + 16}" text-anchor="middle" fill="#555">${escapeXml(formatAxisValue(v, spec.x.kind ?? "number", xSpan))}</text>`,
    );
  }
  out.push(
    `<text class="axis-label" x="${num(MARGIN.left + pw / 2)}" y="${height - 6}" text-anchor="middle" fill="#333">${escapeXml(spec.x.label)}</text></g>`,
  );
}

function bands(out: string[], list: readonly Band[], plot: Plot): void {
  const { pw, ty } = plot;
  for (const b of list) {
    const color = b.color ?? "#0072B2";
    const [top, bottom] = [ty(Math.max(b.low, b.high)), ty(Math.min(b.low, b.high))];
    out.push(
      `<g class="band" data-low="${raw(b.low)}" data-high="${raw(b.high)}" data-label="${escapeXml(b.label)}"><rect x="${MARGIN.left}" y="${num(top)}" width="${pw}" height="${num(Math.max(1, bottom - top))}" fill="${color}" fill-opacity="0.13"/>`,
    );
    out.push(`<text x="${MARGIN.left + 4}" y="${num(top)}" dy="11" fill="${color}"${HALO}>${escapeXml(b.label)}</text></g>`);
  }
}

function refLines(out: string[], lines: readonly RefLine[], plot: Plot): void {
  const { pw, ph, xDomain, yDomain, tx, ty } = plot;
  out.push(`<g class="ref-lines">`);
  for (const l of lines) {
    const color = l.color ?? "#C62828";
    if (l.axis === "y") {
      if (l.value < yDomain[0] || l.value > yDomain[1]) continue;
      const y = num(ty(l.value));
      out.push(
        `<g class="ref-line" data-axis="y" data-value="${raw(l.value)}" data-label="${escapeXml(l.label)}"><line x1="${MARGIN.left}" y1="${y}" x2="${MARGIN.left + pw}" y2="${y}" stroke="${color}" stroke-width="1.5" stroke-dasharray="6 4"/>`,
      );
      out.push(`<text x="${MARGIN.left + pw - 4}" y="${y}" dy="-4" text-anchor="end" fill="${color}"${HALO}>${escapeXml(l.label)}</text></g>`);
    } else {
      if (l.value < xDomain[0] || l.value > xDomain[1]) continue;
      const x = num(tx(l.value));
      out.push(
        `<g class="ref-line" data-axis="x" data-value="${raw(l.value)}" data-label="${escapeXml(l.label)}"><line x1="${x}" y1="${plot.top}" x2="${x}" y2="${plot.top + ph}" stroke="${color}" stroke-width="1.5" stroke-dasharray="6 4"/>`,
      );
      out.push(`<text x="${x}" y="${plot.top + 12}" dx="4" fill="${color}"${HALO}>${escapeXml(l.label)}</text></g>`);
    }
  }
  out.push(`</g>`);
}

/** Draws one series; returns how many of its points have a value. */
function seriesMarks(out: string[], s: DrawnSeries, plot: Plot): number {
  const { tx, ty } = plot;
  const style = s.style ?? "line";
  const valid = s.points.filter((p): p is readonly [number, number] => p[1] !== null);
  out.push(`<g class="series" data-series="${escapeXml(s.name)}" data-style="${style}" data-count="${valid.length}">`);
  if (style === "line" || style === "dashed" || style === "line+points") {
    let segment: (readonly [number, number])[] = [];
    const flush = (): void => {
      if (segment.length === 0) return;
      const pts = segment.map(([x, y]) => `${num(tx(x))},${num(ty(y))}`).join(" ");
      const dash = style === "dashed" ? ` stroke-dasharray="6 4"` : "";
      out.push(
        `<polyline points="${pts}" fill="none" stroke="${s.color}" stroke-width="1.8" stroke-linejoin="round"${dash} data-x="${segment.map(([x]) => raw(x)).join(" ")}" data-y="${segment.map(([, y]) => raw(y)).join(" ")}"/>`,
      );
      segment = [];
    };
    for (const p of s.points) {
      if (p[1] === null) flush();
      else segment.push([p[0], p[1]]);
    }
    flush();
  }
  if (style === "points" || style === "line+points") {
    for (const [x, y] of valid) out.push(`<circle cx="${num(tx(x))}" cy="${num(ty(y))}" r="3.5" fill="${s.color}" data-x="${raw(x)}" data-y="${raw(y)}"/>`);
  }
  if (style === "cross") {
    for (const [x, y] of valid) {
      const cx = tx(x);
      const cy = ty(y);
      out.push(
        `<path d="M${num(cx - 4)} ${num(cy - 4)}L${num(cx + 4)} ${num(cy + 4)}M${num(cx - 4)} ${num(cy + 4)}L${num(cx + 4)} ${num(cy - 4)}" stroke="${s.color}" stroke-width="2" data-x="${raw(x)}" data-y="${raw(y)}"/>`,
      );
    }
  }
  out.push(`</g>`);
  return valid.length;
}

/**
 * A chart as a standalone SVG file (XML prolog added).
 *
 * @example
 * ```ts
 * await writeFile("util.svg", svgDocument(renderChart(spec)));
 * ```
 */
export function svgDocument(svg: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n${svg}\n`;
}
