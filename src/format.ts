/**
 * How brim's numbers read, one home for each wording: shares and percentages, seconds, bytes and
 * rates, with "n/a" where a number was not measured. Analysis, reports, the dashboard and the CLI
 * all print through these.
 *
 * @module
 */
import { formatBytes } from "./bytes.ts";

/**
 * A share (0–1) as a percentage with one decimal.
 *
 * @example
 * ```ts
 * formatShare(0.3127); // "31.3 %"
 * ```
 */
export function formatShare(share: number | null): string {
  return share === null ? "n/a" : `${(100 * share).toFixed(1)} %`;
}

/**
 * A percentage already on the 0–100 scale.
 *
 * @example
 * ```ts
 * formatPercent(97.04); // "97 %"
 * ```
 */
export function formatPercent(value: number | null): string {
  return value === null ? "n/a" : `${value >= 10 ? value.toFixed(0) : value.toFixed(1)} %`;
}

/**
 * Seconds as milliseconds or seconds, three significant digits.
 *
 * @example
 * ```ts
 * formatSeconds(0.01234); // "12.3 ms"
 * formatSeconds(2.5);     // "2.50 s"
 * ```
 */
export function formatSeconds(seconds: number | null): string {
  if (seconds === null) return "n/a";
  if (seconds < 1) return `${(seconds * 1000).toPrecision(3)} ms`;
  if (seconds < 120) return `${seconds.toPrecision(3)} s`;
  return `${(seconds / 60).toFixed(1)} min`;
}

/**
 * Bytes in binary units, or "n/a".
 *
 * @example
 * ```ts
 * formatMaybeBytes(null); // "n/a"
 * ```
 */
export function formatMaybeBytes(bytes: number | null): string {
  return bytes === null ? "n/a" : formatBytes(bytes);
}

/**
 * A rate with three significant digits (no exponent for everyday values).
 *
 * @example
 * ```ts
 * formatRate(1234.5); // "1235"
 * formatRate(12.345); // "12.3"
 * ```
 */
export function formatRate(value: number | null): string {
  if (value === null) return "n/a";
  if (Math.abs(value) >= 100) return value.toFixed(0);
  return value.toPrecision(3);
}

/**
 * Rows as columns two spaces apart, each as wide as its widest cell (the first row's columns):
 * `align` per column, "l" padded on the right (the default) or "r" on the left; no trailing spaces.
 *
 * @example
 * ```ts
 * table([["GPU", "memory"], ["0", "80 GiB"]], ["l", "r"]); // ["GPU  memory", "0    80 GiB"]
 * ```
 */
export function table(rows: readonly (readonly string[])[], align: readonly ("l" | "r")[] = []): string[] {
  const widths = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) =>
    r
      .map((cell, i) => (align[i] === "r" ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd(),
  );
}

/**
 * Prose as lines at most `width` wide (a longer word keeps a line of its own), broken between words
 * (any run of white space is one break): the first line starts with `indent`, the rest with
 * `indent` + `hang`.
 *
 * @example
 * ```ts
 * wrap("one two three", 9, "", "  "); // ["one two", "  three"]
 * ```
 */
export function wrap(text: string, width: number, indent = "", hang = ""): string[] {
  const lines: string[] = [];
  let line = indent;
  for (const word of text.split(/\s+/).filter((w) => w !== "")) {
    if (line.trim() === "") line = `${line}${word}`;
    else if (line.length + 1 + word.length > width) {
      lines.push(line);
      line = `${indent}${hang}${word}`;
    } else line = `${line} ${word}`;
  }
  if (line.trim() !== "") lines.push(line);
  return lines;
}
