/**
 * Whether a timeline file is damaged: overwritten, zero-filled, truncated into the middle of its
 * lines. A reader skips lines that are not timeline entries (a crash can tear the last one), so a
 * damaged file would read as a run with no steps, and what is said about it would be confidently
 * wrong. This looks at the file's head and tail (bounded: at most 2 MiB read) and calls it damaged
 * when lines there are not entries — more than one in ten, or every one.
 *
 * @module
 */
import { open } from "node:fs/promises";
import { BrimError } from "../errors/index.ts";
import { parseTimelineLine } from "./timeline/index.ts";

/**
 * What {@link timelineDamage} found.
 *
 * @example
 * ```ts
 * const d: TimelineDamage = { lines: 120, bad: 120, firstBadAt: 0 };
 * ```
 */
export interface TimelineDamage {
  /** whole lines looked at */
  lines: number;
  /** of them, lines that are not timeline entries */
  bad: number;
  /** byte offset of the first of those */
  firstBadAt: number;
}

const SPAN = 2 ** 20;

/**
 * Null for a sound (or missing, or empty) timeline; what is wrong otherwise.
 *
 * @example
 * ```ts
 * const damage = await timelineDamage(".brim/runs/20261122-101500-3f2a/timeline.ndjson");
 * if (damage !== null) console.log(`${damage.bad} of ${damage.lines} lines are not timeline entries`);
 * ```
 */
export async function timelineDamage(path: string): Promise<TimelineDamage | null> {
  let handle;
  try {
    handle = await open(path, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
  try {
    const size = (await handle.stat()).size;
    const spans =
      size <= 2 * SPAN
        ? [[0, size]]
        : [
            [0, SPAN],
            [size - SPAN, size],
          ];
    let lines = 0;
    let bad = 0;
    let firstBadAt = -1;
    for (const [from = 0, to = 0] of spans) {
      const buffer = Buffer.alloc(to - from);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, from);
      let start = 0;
      // A span that starts mid-file starts mid-line: its first piece is not a line.
      if (from > 0) start = buffer.indexOf(0x0a) + 1;
      if (start <= 0 && from > 0) continue;
      for (let nl = buffer.indexOf(0x0a, start); nl >= 0 && nl < bytesRead; nl = buffer.indexOf(0x0a, start)) {
        const text = buffer.toString("utf8", start, nl);
        if (text.trim() !== "") {
          lines++;
          if (parseTimelineLine(text) === null) {
            bad++;
            if (firstBadAt < 0) firstBadAt = from + start;
          }
        }
        start = nl + 1;
      }
      // Bytes after the last newline: a line being written, or one a crash tore. Garbage without any
      // newline at all is damage too.
      if (lines === 0 && bytesRead > 4096 && start === 0) {
        lines++;
        bad++;
        firstBadAt = from;
      }
    }
    if (bad === 0 || (bad * 10 <= lines && bad < lines)) return null;
    return { lines, bad, firstBadAt };
  } finally {
    await handle.close();
  }
}

/**
 * Throws `E_PARSE` with one line when a run's timeline is damaged (see {@link timelineDamage}).
 *
 * @example
 * ```ts
 * await assertTimelineSound(path, id); // before diagnosing a run
 * ```
 */
export async function assertTimelineSound(path: string, runId: string): Promise<void> {
  const damage = await timelineDamage(path);
  if (damage === null) return;
  throw new BrimError(
    "E_PARSE",
    `the timeline of run ${runId} is damaged: ${damage.bad} of the ${damage.lines} lines looked at are not timeline entries (the first at byte ${damage.firstBadAt}); its numbers cannot be trusted (${path})`,
  );
}
