/**
 * A job's output read as it comes: `\r`-updated progress bars folded to what shows on screen.
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

/** What reading a job's output calls: each chunk as it comes, each `\r`/`\n` segment, each settled line. */
export interface OutputListeners {
  onChunk?: (stream: 1 | 2, chunk: string) => void;
  /** each piece between carriage returns and newlines, as it comes (progress bars redraw with `\r`) */
  onSegment: (stream: 1 | 2, text: string) => void;
  /** each complete line, `\r` updates folded to what it finally shows */
  onLine: (stream: 1 | 2, line: string) => void;
}

/**
 * Reads output sources into segments and lines; resolves each source's promise once its last
 * (unterminated) line was delivered.
 *
 * @example
 * ```ts
 * const ended = pipeOutput([{ stream: 1, onData: (l) => l("a\rb\n"), ended: Promise.resolve() }], { onSegment: () => {}, onLine: (_, line) => console.log(line) });
 * // prints "b"
 * ```
 */
export function pipeOutput(
  sources: readonly { stream: 1 | 2; onData: (listener: (chunk: string) => void) => void; ended: Promise<void> }[],
  listeners: OutputListeners,
): Promise<void>[] {
  return sources.map((source) => {
    const { stream, ended } = source;
    let partial = "";
    let segment = "";
    source.onData((chunk: string) => {
      listeners.onChunk?.(stream, chunk);
      // progress bars redraw with \r: each update is read as it comes, not when the line ends
      const segments = (segment + chunk).split(/[\r\n]/);
      segment = segments.pop() ?? "";
      for (const text of segments) listeners.onSegment(stream, text);
      const lines = (partial + chunk).split("\n");
      // a \r progress bar never ends its line: keep only what it shows now
      partial = compactPartial(lines.pop() ?? "");
      for (const line of lines) listeners.onLine(stream, settleLine(line));
    });
    return ended.then(() => {
      if (partial !== "") listeners.onLine(stream, settleLine(partial));
      partial = "";
    });
  });
}
