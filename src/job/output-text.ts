/**
 * How `\r`-updated output (progress bars) reads once it is on screen.
 *
 * @module
 */

/**
 * What a `\r`-updated line finally shows: the text after its last carriage return.
 *
 * @example
 * ```ts
 * settleLine("  1%|▏ \r 50%|█████ \r100%|██████████\r"); // "100%|██████████"
 * ```
 */
export function settleLine(line: string): string {
  const trimmed = line.replace(/\r+$/, "");
  return trimmed.slice(trimmed.lastIndexOf("\r") + 1);
}

/**
 * An unfinished line cut to what can still show: from its last carriage return that has text after
 * it (so that appending more output and settling gives what the terminal shows).
 *
 * @example
 * ```ts
 * compactPartial("10%\r20%\r30%"); // "\r30%"
 * settleLine(compactPartial("10%\r20%\r") + "\n"); // "20%"
 * ```
 */
export function compactPartial(partial: string): string {
  const at = partial.replace(/\r+$/, "").lastIndexOf("\r");
  return at <= 0 ? partial : partial.slice(at);
}
