/**
 * How a chart's axes read: tick positions (nice steps, powers of a log base) and tick labels in the
 * axis' units (bytes, time, percent).
 *
 * @module
 */
/**
 * How values on an axis read.
 *
 * @example
 * ```ts
 * const kind: AxisKind = "bytes";
 * ```
 */
export type AxisKind = "number" | "percent" | "bytes" | "seconds" | "time";

function trim(value: number): string {
  if (value === 0) return "0";
  const abs = Math.abs(value);
  const text = abs >= 1000 ? value.toFixed(0) : abs >= 10 ? value.toFixed(1) : abs >= 1 ? value.toFixed(2) : value.toPrecision(3);
  return text.includes(".") ? text.replace(/\.?0+$/, "") : text;
}

const BYTE_UNITS: readonly [string, number][] = [
  ["TiB", 2 ** 40],
  ["GiB", 2 ** 30],
  ["MiB", 2 ** 20],
  ["KiB", 2 ** 10],
  ["B", 1],
];

function byteUnit(max: number): [string, number] {
  return BYTE_UNITS.find(([, size]) => max >= size) ?? ["B", 1];
}

function timeUnit(max: number): [string, number] {
  if (max >= 3 * 3600) return ["h", 3600];
  if (max >= 300) return ["min", 60];
  return ["s", 1];
}

/**
 * Formats an axis value for a label.
 *
 * @example
 * ```ts
 * formatAxisValue(3 * 2 ** 30, "bytes", 8 * 2 ** 30); // "3 GiB"
 * formatAxisValue(600, "time", 1200);                  // "10 min"
 * ```
 */
export function formatAxisValue(value: number, kind: AxisKind, span: number): string {
  switch (kind) {
    case "percent":
      return `${trim(value)} %`;
    case "bytes": {
      const [unit, size] = byteUnit(span);
      return `${trim(value / size)} ${unit}`;
    }
    case "time": {
      const [unit, size] = timeUnit(span);
      return `${trim(value / size)} ${unit}`;
    }
    case "seconds":
      return span < 1 ? `${trim(value * 1000)} ms` : `${trim(value)} s`;
    default:
      return trim(value);
  }
}

function niceStep(range: number, count: number): number {
  const raw = range / Math.max(1, count);
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const n = raw / magnitude;
  return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * magnitude;
}

/**
 * Round tick values covering `[min, max]`, in the axis's own unit (GiB steps for bytes, minutes for time).
 *
 * @example
 * ```ts
 * niceTicks(0, 97, "percent"); // { min: 0, max: 100, ticks: [0, 20, 40, 60, 80, 100] }
 * ```
 */
export function niceTicks(min: number, max: number, kind: AxisKind, count = 5): { min: number; max: number; ticks: number[] } {
  if (!(max > min)) max = min + (min === 0 ? 1 : Math.abs(min) * 0.1);
  const size = kind === "bytes" ? byteUnit(Math.max(Math.abs(min), Math.abs(max)))[1] : kind === "time" ? timeUnit(max - min)[1] : 1;
  const step = niceStep((max - min) / size, count) * size;
  const lo = Math.floor(min / step + 1e-9) * step;
  const hi = Math.ceil(max / step - 1e-9) * step;
  const ticks: number[] = [];
  for (let v = lo; v <= hi + step * 1e-6; v += step) ticks.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return { min: lo, max: hi, ticks };
}

export function logTicks(min: number, max: number, base: number): { min: number; max: number; ticks: number[] } {
  const log = (v: number): number => Math.log(v) / Math.log(base);
  const lo = base ** Math.floor(log(Math.max(min, 1e-9)) + 1e-9);
  const hi = base ** Math.ceil(log(Math.max(max, lo * base)) - 1e-9);
  const ticks: number[] = [];
  for (let v = lo; v <= hi * (1 + 1e-9); v *= base) ticks.push(v);
  return { min: lo, max: hi, ticks };
}
