/**
 * Reading a timeline.ndjson that is still being written: whole lines only, from a byte offset, so a
 * follower sees each entry once and never half of one.
 *
 * @module
 */
import { open } from "node:fs/promises";
import { parseTimeline } from "../record/store.ts";
import type { TimelineEntry } from "../record/types.ts";

/**
 * Entries read from a timeline, and the byte offset just after the last whole line read.
 *
 * @example
 * ```ts
 * const { entries, offset }: TimelineChunk = await readTimelineFrom(path, 0);
 * ```
 */
export interface TimelineChunk {
  entries: TimelineEntry[];
  offset: number;
}

const MAX_CHUNK = 64 * 2 ** 20;

/**
 * Reads the whole lines of a timeline file from `offset` on (up to `until`, when given). A missing
 * file reads as nothing.
 *
 * @example
 * ```ts
 * const first = await readTimelineFrom(path, 0);
 * const next = await readTimelineFrom(path, first.offset); // only what was appended since
 * ```
 */
export async function readTimelineFrom(path: string, offset: number, until = Infinity): Promise<TimelineChunk> {
  let handle;
  try {
    handle = await open(path, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { entries: [], offset };
    throw error;
  }
  try {
    const size = Math.min((await handle.stat()).size, until);
    if (size <= offset) return { entries: [], offset: Math.min(offset, size) };
    const entries: TimelineEntry[] = [];
    let at = offset;
    while (at < size) {
      const length = Math.min(size - at, MAX_CHUNK);
      const buffer = Buffer.alloc(length);
      const { bytesRead } = await handle.read(buffer, 0, length, at);
      const end = buffer.lastIndexOf(0x0a, bytesRead - 1);
      if (end < 0) break;
      entries.push(...parseTimeline(buffer.subarray(0, end + 1).toString("utf8")));
      at += end + 1;
      if (bytesRead < length) break;
    }
    return { entries, offset: at };
  } finally {
    await handle.close();
  }
}

/**
 * Follows a timeline file: each {@link TimelineTail.poll} returns the entries appended since the last.
 *
 * @example
 * ```ts
 * const tail = new TimelineTail(join(store.runDir(id), "timeline.ndjson"));
 * setInterval(async () => send(await tail.poll()), 500);
 * ```
 */
export class TimelineTail {
  readonly path: string;
  #offset: number;

  constructor(path: string, offset = 0) {
    this.path = path;
    this.#offset = offset;
  }

  /** Byte offset just after the last whole line returned. */
  get offset(): number {
    return this.#offset;
  }

  /** The entries appended since the last poll. */
  async poll(): Promise<TimelineEntry[]> {
    const chunk = await readTimelineFrom(this.path, this.#offset);
    this.#offset = chunk.offset;
    return chunk.entries;
  }
}
