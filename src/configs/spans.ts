/**
 * Offsets in config text: lines, columns and the splice every minimal-span edit ends in.
 *
 * @module
 */
import { BrimError } from "../errors/index.ts";

/**
 * A replacement of `text.slice(start, end)` by `insert`.
 *
 * @example
 * ```ts
 * const splice: Splice = { start: 12, end: 14, insert: "64" };
 * ```
 */
export interface Splice {
  start: number;
  end: number;
  insert: string;
}

/**
 * Applies one splice.
 *
 * @example
 * ```ts
 * applySplice("batch_size: 16\n", { start: 12, end: 14, insert: "64" }); // "batch_size: 64\n"
 * ```
 */
export function applySplice(text: string, splice: Splice): string {
  return text.slice(0, splice.start) + splice.insert + text.slice(splice.end);
}

/**
 * The line break the file uses: `"\r\n"` when its first line ends so, else `"\n"`.
 *
 * @example
 * ```ts
 * eolOf("a: 1\r\nb: 2\r\n"); // "\r\n"
 * ```
 */
export function eolOf(text: string): string {
  const nl = text.indexOf("\n");
  return nl > 0 && text[nl - 1] === "\r" ? "\r\n" : "\n";
}

/**
 * 1-based line and column of an offset.
 *
 * @example
 * ```ts
 * lineCol("a: 1\nb: [\n", 9); // { line: 2, col: 5 }
 * ```
 */
export function lineCol(text: string, offset: number): { line: number; col: number } {
  let line = 1;
  let start = 0;
  for (let i = text.indexOf("\n"); i !== -1 && i < offset; i = text.indexOf("\n", i + 1)) {
    line++;
    start = i + 1;
  }
  return { line, col: offset - start + 1 };
}

/**
 * Offset of the start of the line that holds `offset`.
 *
 * @example
 * ```ts
 * lineStartOf("a: 1\n  b: 2\n", 9); // 5
 * ```
 */
export function lineStartOf(text: string, offset: number): number {
  return text.lastIndexOf("\n", offset - 1) + 1;
}

/**
 * Offset of the line break that ends the line holding `offset` (before a `\r\n`), or the text's
 * length on a last line without one. An offset just past a line break counts as the end of the
 * line it ends, which is what a span ending "after the newline" wants.
 *
 * @example
 * ```ts
 * lineEndOf("a: 1  # c\nb: 2", 4); // 9
 * ```
 */
export function lineEndOf(text: string, offset: number): number {
  let at = offset > 0 && text[offset - 1] === "\n" ? offset - 1 : text.indexOf("\n", offset);
  if (at === -1) at = text.length;
  return at > 0 && text[at - 1] === "\r" ? at - 1 : at;
}

/**
 * The whitespace that starts the line holding `offset`.
 *
 * @example
 * ```ts
 * indentOf("a:\n    b: 1\n", 9); // "    "
 * ```
 */
export function indentOf(text: string, offset: number): string {
  const start = lineStartOf(text, offset);
  return /^[ \t]*/.exec(text.slice(start, offset))?.[0] ?? "";
}

/**
 * The E_PARSE error for bad syntax at `offset`: `path:line:col: not valid <FORMAT>: <reason>`.
 *
 * @example
 * ```ts
 * throw parseFailure("conf.yaml", text, 42, "YAML", "Map keys must be unique");
 * ```
 */
export function parseFailure(file: string, text: string, offset: number, format: string, reason: string): BrimError {
  const { line, col } = lineCol(text, offset);
  const first = reason.split("\n")[0] ?? reason;
  return new BrimError("E_PARSE", `${file}:${line}:${col}: not valid ${format}: ${first.replace(/ at line \d+, column \d+:?$/, "")}`);
}

/**
 * Widens a one-line replacement over the spaces that follow it, when those spaces (two or more)
 * line a trailing `#` comment up, and adjusts them so the comment stays in its column.
 *
 * @example
 * ```ts
 * keepCommentColumn("bs: 4     # small\n", { start: 4, end: 5, insert: "256" });
 * // { start: 4, end: 10, insert: "256   " } -> "bs: 256   # small\n"
 * ```
 */
export function keepCommentColumn(text: string, splice: Splice): Splice {
  if (/[\r\n]/.test(splice.insert)) return splice;
  const pad = /^ {2,}(?=#)/.exec(text.slice(splice.end, splice.end + 256))?.[0];
  if (pad === undefined) return splice;
  const width = Math.max(1, pad.length - (splice.insert.length - (splice.end - splice.start)));
  return { start: splice.start, end: splice.end + pad.length, insert: splice.insert + " ".repeat(width) };
}

/**
 * `text` with a `# comment` line above the line that holds `offset`, at that line's indentation; a
 * comment starting `# brim` right above it (one brim wrote before) is replaced instead of stacked.
 *
 * @example
 * ```ts
 * commentAbove("data:\n  bs: 16\n", 12, "brim tune x: effective batch 16 held");
 * // "data:\n  # brim tune x: effective batch 16 held\n  bs: 16\n"
 * ```
 */
export function commentAbove(text: string, offset: number, comment: string): string {
  const start = lineStartOf(text, offset);
  const indent = /^[ \t]*/.exec(text.slice(start))?.[0] ?? "";
  const line = `${indent}# ${comment.replace(/[\r\n]+/g, " ")}${eolOf(text)}`;
  const above = start > 0 ? lineStartOf(text, start - 1) : start;
  const replaced = above < start && /^[ \t]*# brim\b/.test(text.slice(above, start)) ? above : start;
  return text.slice(0, replaced) + line + text.slice(start);
}
