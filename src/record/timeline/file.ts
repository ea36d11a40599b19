/**
 * The timeline file, streamed: its entries read line by line in bounded memory, and a whole
 * file (or evenly spread parts of one too long to read whole) folded into a {@link Timeline}.
 *
 * @module
 */
import { createReadStream } from "node:fs";
import { open } from "node:fs/promises";
import type { TimelineEntry } from "../types.ts";
import { parseTimelineLine } from "./entries.ts";
import { TimelineFold } from "./fold.ts";
import type { Timeline } from "./types.ts";

/**
 * Reads a timeline file line by line in bounded memory (one chunk and one line at a time), from
 * byte `from` up to byte `until`. A last line without its newline (still being written, or torn by
 * a crash) is ignored; a missing file reads as nothing. `onOffset` learns the byte offset after the
 * last whole line.
 *
 * @example
 * ```ts
 * for await (const entry of timelineEntries(path)) if (entry.kind === "end") console.log(entry.cause);
 * ```
 */
export async function* timelineEntries(
  path: string,
  options: { from?: number; until?: number; onOffset?: (offset: number) => void } = {},
): AsyncGenerator<TimelineEntry> {
  const from = options.from ?? 0;
  const until = options.until ?? Infinity;
  if (until <= from) {
    options.onOffset?.(from);
    return;
  }
  const stream = createReadStream(path, { start: from, ...(until !== Infinity ? { end: until - 1 } : {}), highWaterMark: 1 << 20 });
  let rest: Buffer | null = null;
  let offset = from;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      let buffer: Buffer = rest === null ? chunk : Buffer.concat([rest, chunk]);
      let start = 0;
      let newline = buffer.indexOf(0x0a, start);
      while (newline >= 0) {
        const entry = parseTimelineLine(buffer.toString("utf8", start, newline));
        offset += newline + 1 - start;
        start = newline + 1;
        if (entry !== null) yield entry;
        newline = buffer.indexOf(0x0a, start);
      }
      buffer = buffer.subarray(start);
      rest = buffer.length > 0 ? Buffer.from(buffer) : null;
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  options.onOffset?.(offset);
}

/**
 * A timeline file read as a stream in bounded memory ({@link timelineEntries}); a missing file is an
 * empty timeline.
 *
 * @example
 * ```ts
 * const tl = await loadTimeline(join(store.runDir(id), "timeline.ndjson"));
 * ```
 */
export async function loadTimeline(path: string, options: { until?: number; onOffset?: (offset: number) => void } = {}): Promise<Timeline> {
  const fold = new TimelineFold();
  for await (const entry of timelineEntries(path, options)) fold.add(entry);
  return fold.timeline();
}

/**
 * A timeline for a page that must answer fast: read whole when it is at most `budgetBytes`, else
 * from `parts` evenly spread windows of the file (the first and the last included) that add up to
 * `budgetBytes` — `sampled` is then true and its measures cover only what was read. `offset` is
 * where a follower resumes: just after the last whole line.
 *
 * @example
 * ```ts
 * const { timeline, offset } = await loadTimelineSpread(path, { budgetBytes: 32 * 2 ** 20 });
 * ```
 */
export async function loadTimelineSpread(
  path: string,
  options: { budgetBytes: number; parts?: number; until?: number; fold?: TimelineFold },
): Promise<{ timeline: Timeline; offset: number; size: number }> {
  const fold = options.fold ?? new TimelineFold();
  let handle;
  try {
    handle = await open(path, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { timeline: fold.timeline(), offset: 0, size: 0 };
    throw error;
  }
  try {
    const size = Math.min((await handle.stat()).size, options.until ?? Infinity);
    if (size <= options.budgetBytes) {
      let offset = 0;
      for await (const entry of timelineEntries(path, { until: size, onOffset: (o) => (offset = o) })) fold.add(entry);
      return { timeline: fold.timeline(), offset, size };
    }
    fold.markSampled();
    const parts = Math.max(2, options.parts ?? 256);
    const window = Math.max(4096, Math.floor(options.budgetBytes / parts));
    const buffer = Buffer.alloc(window);
    let offset = 0;
    for (let i = 0; i < parts; i++) {
      const at = Math.floor((i * (size - window)) / (parts - 1));
      const { bytesRead } = await handle.read(buffer, 0, window, at);
      const last = buffer.lastIndexOf(0x0a, bytesRead - 1);
      if (last < 0) continue;
      let from = at === 0 ? 0 : buffer.indexOf(0x0a) + 1;
      while (from <= last) {
        const newline = buffer.indexOf(0x0a, from);
        const entry = parseTimelineLine(buffer.toString("utf8", from, newline));
        if (entry !== null) fold.add(entry);
        from = newline + 1;
      }
      offset = at + last + 1;
    }
    return { timeline: fold.timeline(), offset, size };
  } finally {
    await handle.close();
  }
}
