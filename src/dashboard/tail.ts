/**
 * Reading a timeline.ndjson that is still being written: whole lines only, from a byte offset, so a
 * follower sees each entry once and never half of one. Streamed: memory stays bounded however long
 * the run.
 *
 * @module
 */
import { timelineEntries } from "../record/timeline/index.ts";
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

/**
 * Reads the whole lines of a timeline file from `offset` on (up to `until`, when given), each passed
 * to `each` when given (then `entries` stays empty: nothing is held), else collected. A missing file
 * reads as nothing.
 *
 * @example
 * ```ts
 * const first = await readTimelineFrom(path, 0);
 * const next = await readTimelineFrom(path, first.offset); // only what was appended since
 * ```
 */
export async function readTimelineFrom(path: string, offset: number, until = Infinity, each?: (entry: TimelineEntry) => void): Promise<TimelineChunk> {
  const entries: TimelineEntry[] = [];
  let at = offset;
  for await (const entry of timelineEntries(path, { from: offset, until, onOffset: (o) => (at = o) })) {
    if (each !== undefined) each(entry);
    else entries.push(entry);
  }
  return { entries, offset: at };
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

  /** The entries appended since the last poll (at most `maxBytes` of them, the rest at the next poll). */
  async poll(maxBytes = 8 * 2 ** 20): Promise<TimelineEntry[]> {
    const chunk = await readTimelineFrom(this.path, this.#offset, this.#offset + maxBytes);
    this.#offset = chunk.offset;
    return chunk.entries;
  }
}
