/**
 * Writing a run while it runs: the append-only timeline and output files in whole lines, run.json
 * updated atomically, and what a full or failing disk costs (held in memory up to a bound, then
 * counted as lost), with a reserve so that run.json can still be finished on a full disk.
 *
 * @module
 */
import { closeSync, fstatSync, fsyncSync, ftruncateSync, openSync, writeSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { BrimError } from "../errors/index.ts";
import { ioCause, writeFileAtomic } from "../files.ts";
import type { RunMeta, RunSummary, TimelineEntry } from "./types.ts";

const TIMELINE_FLUSH_MS = 250;

// Runs hold command lines, working directories and output: on a shared machine, the user's only.
// Folders brim creates are 0700, files 0600 (a store made before keeps the modes it has).
/** Mode of the folders brim creates in a store. */
export const PRIVATE_DIR = 0o700;
/** Mode of the files brim creates in a store. */
export const PRIVATE_FILE = 0o600;

/**
 * A record written whole or not at all, as indented JSON.
 *
 * @example
 * ```ts
 * await writeJsonAtomic(join(dir, "run.json"), meta);
 * ```
 */
export async function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  await writeFileAtomic(path, `${JSON.stringify(value, null, 2)}\n`, { mode: PRIVATE_FILE });
}

/**
 * The synchronous file calls a {@link RunWriter} makes; tests replace them to inject a full or
 * failing disk.
 *
 * @example
 * ```ts
 * const io: StoreIo = { ...realStoreIo, writeSync: () => { throw Object.assign(new Error("full"), { code: "ENOSPC" }); } };
 * ```
 */
export interface StoreIo {
  openSync(path: string, flags: string): number;
  writeSync(fd: number, buffer: Buffer, offset: number, length: number): number;
  ftruncateSync(fd: number, length: number): void;
  fstatSync(fd: number): { size: number };
  fsyncSync(fd: number): void;
  closeSync(fd: number): void;
}

/** The real file calls. */
export const realStoreIo: StoreIo = {
  openSync: (path, flags) => openSync(path, flags, PRIVATE_FILE),
  writeSync: (fd, buffer, offset, length) => writeSync(fd, buffer, offset, length),
  ftruncateSync: (fd, length) => ftruncateSync(fd, length),
  fstatSync: (fd) => fstatSync(fd),
  fsyncSync: (fd) => fsyncSync(fd),
  closeSync: (fd) => closeSync(fd),
};

/** Timeline bytes held in memory while the disk refuses them (beyond this, entries are dropped and counted). */
export const MAX_PENDING_BYTES = 8 * 2 ** 20;
/** Space set aside in each running run's folder, given back so that run.json can still be finished on a full disk. */
export const RESERVE_BYTES = 64 * 1024;
/** The reserve file's name in a running run's folder. */
export const RESERVE_NAME = ".brim-reserve";

/** What a writer lost to a failing store. */
export interface StoreLoss {
  /** The first failure, as one line. */
  error: BrimError;
  /** Timeline entries that never reached the disk. */
  entriesLost: number;
  /** Output lines that never reached the disk. */
  outputLinesLost: number;
}

/** An append-only file written in whole lines: a failed write is cut back to the last whole line. */
class LineFile {
  readonly path: string;
  #io: StoreIo;
  #fd: number | null;
  #size: number;

  constructor(path: string, io: StoreIo) {
    this.path = path;
    this.#io = io;
    this.#fd = io.openSync(path, "a");
    this.#size = io.fstatSync(this.#fd).size;
  }

  /** Writes whole lines; throws the I/O error after cutting off whatever part of them reached the file. */
  write(text: string): void {
    if (this.#fd === null) throw new Error(`${this.path} is closed`);
    const bytes = Buffer.from(text, "utf8");
    let done = 0;
    try {
      while (done < bytes.length) {
        const n = this.#io.writeSync(this.#fd, bytes, done, bytes.length - done);
        if (n <= 0) throw Object.assign(new Error("no space left on device, write"), { code: "ENOSPC" });
        done += n;
      }
    } catch (error) {
      if (done > 0) {
        try {
          this.#io.ftruncateSync(this.#fd, this.#size);
        } catch {
          // A read-only remount refuses even this; readers skip a torn last line.
        }
      }
      throw error;
    }
    this.#size += bytes.length;
  }

  close(sync: boolean): void {
    if (this.#fd === null) return;
    const fd = this.#fd;
    this.#fd = null;
    try {
      if (sync) this.#io.fsyncSync(fd);
    } finally {
      this.#io.closeSync(fd);
    }
  }
}

/**
 * Writes one run: metadata rewritten atomically, a timeline appended line by line (entries that
 * arrive together written together at the end of the event loop's turn, whole lines only, so a reader
 * never sees half an entry), and the job's output. A failing store (full, read-only, gone) never throws out of a timer or a handler: the writer
 * stops writing the timeline and output, holds at most {@link MAX_PENDING_BYTES}, cuts any partial line
 * back, reports the first failure once through `onFailure`, and {@link RunWriter.finish} still tries to
 * finish run.json (giving back the space it set aside at start).
 *
 * @example
 * ```ts
 * const run = await store.createRun({ kind: "run", command: ["python", "train.py"], ... });
 * run.append({ t: Date.now() / 1000, kind: "start", pid: 1234 });
 * await run.finish({ cause: "ok", exit_code: 0, signal: null, message: "finished normally" }, summary);
 * ```
 */
export class RunWriter {
  readonly id: string;
  readonly dir: string;
  #meta: RunMeta;
  #timeline: LineFile;
  #output: LineFile;
  #pending: string[] = [];
  #pendingBytes = 0;
  #timer: NodeJS.Timeout;
  #closed = false;
  #flushQueued = false;
  #loss: StoreLoss | null = null;
  #onFailure: ((loss: StoreLoss) => void) | null = null;

  constructor(dir: string, meta: RunMeta, io: StoreIo = realStoreIo) {
    this.id = meta.id;
    this.dir = dir;
    this.#meta = meta;
    this.#timeline = new LineFile(join(dir, "timeline.ndjson"), io);
    try {
      this.#output = new LineFile(join(dir, "output.log"), io);
    } catch (error) {
      this.#timeline.close(false);
      throw error;
    }
    this.#timer = setInterval(() => this.flush(), TIMELINE_FLUSH_MS);
    this.#timer.unref();
  }

  /** The metadata as last written. */
  get meta(): RunMeta {
    return this.#meta;
  }

  /** What the store refused, once it has; null while every write succeeded. */
  get loss(): StoreLoss | null {
    return this.#loss === null ? null : { ...this.#loss };
  }

  /** Called once, at the first write the store refuses. */
  onFailure(listener: (loss: StoreLoss) => void): void {
    this.#onFailure = listener;
  }

  /** Queues one timeline entry. */
  append(entry: TimelineEntry): void {
    if (this.#closed) return;
    if (this.#loss !== null) {
      this.#loss.entriesLost++;
      return;
    }
    const line = `${JSON.stringify(entry)}\n`;
    if (this.#pendingBytes + line.length > MAX_PENDING_BYTES) this.flush();
    if (this.#loss !== null || this.#pendingBytes + line.length > MAX_PENDING_BYTES) {
      this.#noteLoss(null, 1, 0);
      return;
    }
    this.#pending.push(line);
    this.#pendingBytes += line.length;
    // Written at the end of this turn of the event loop: one write for all that arrived together,
    // and nothing held long enough to be lost with brim (a SIGKILL loses only what it never read).
    if (!this.#flushQueued) {
      this.#flushQueued = true;
      setImmediate(() => {
        this.#flushQueued = false;
        this.flush();
      }).unref();
    }
  }

  /** Appends one line of the job's output ("1 " stdout, "2 " stderr). */
  appendOutput(stream: 1 | 2, line: string): void {
    if (this.#closed) return;
    if (this.#loss !== null) {
      this.#loss.outputLinesLost++;
      return;
    }
    try {
      this.#output.write(`${stream} ${line}\n`);
    } catch (error) {
      this.#fail(error, "output.log", 0, 1);
    }
  }

  /** Writes queued timeline entries now; a refused write is recorded, never thrown. */
  flush(): void {
    if (this.#pending.length === 0 || this.#closed) return;
    const lines = this.#pending;
    this.#pending = [];
    this.#pendingBytes = 0;
    if (this.#loss !== null) {
      this.#loss.entriesLost += lines.length;
      return;
    }
    try {
      this.#timeline.write(lines.join(""));
    } catch (error) {
      this.#fail(error, "timeline.ndjson", lines.length, 0);
    }
  }

  /** Merges `patch` into the metadata and rewrites run.json atomically. */
  async update(patch: Partial<RunMeta>): Promise<void> {
    this.#meta = { ...this.#meta, ...patch };
    await writeJsonAtomic(join(this.dir, "run.json"), this.#meta);
  }

  /**
   * Appends the `end` entry, flushes, closes the files and writes the end and summary into run.json.
   * On a full disk it gives back the space set aside at start and tries run.json once more; E_IO
   * (one line) only when run.json itself cannot be written.
   */
  async finish(end: RunMeta["end"] & object, summary: RunSummary | null, endedAt: Date = new Date()): Promise<void> {
    if (this.#closed) return;
    const endEntry: TimelineEntry = { t: endedAt.getTime() / 1000, kind: "end", cause: end.cause, exit_code: end.exit_code, signal: end.signal };
    if (this.#loss === null) {
      this.append(endEntry);
      this.flush();
    } else {
      // The space set aside at start is given back for the last line and run.json.
      await rm(join(this.dir, RESERVE_NAME), { force: true }).catch(() => undefined);
      try {
        this.#timeline.write(`${JSON.stringify(endEntry)}\n`);
      } catch {
        this.#loss.entriesLost++;
      }
    }
    clearInterval(this.#timer);
    this.#closed = true;
    for (const file of [this.#timeline, this.#output]) {
      try {
        file.close(this.#loss === null);
      } catch {
        // fsync on a failing disk: the lines already written stay whole.
      }
    }
    try {
      await this.update({ ended_at: endedAt.toISOString(), end, summary });
    } catch (error) {
      await rm(join(this.dir, RESERVE_NAME), { force: true }).catch(() => undefined);
      await this.update({ ended_at: endedAt.toISOString(), end, summary }).catch(() => {
        throw storeError(error, this.dir);
      });
    }
    await rm(join(this.dir, RESERVE_NAME), { force: true }).catch(() => undefined);
  }

  #fail(error: unknown, file: string, entries: number, outputLines: number): void {
    this.#noteLoss(storeError(error, join(this.dir, file)), entries, outputLines);
  }

  #noteLoss(error: BrimError | null, entries: number, outputLines: number): void {
    if (this.#loss !== null) {
      this.#loss.entriesLost += entries;
      this.#loss.outputLinesLost += outputLines;
      return;
    }
    const why =
      error ??
      new BrimError("E_IO", `the run store cannot keep up: more than ${MAX_PENDING_BYTES / 2 ** 20} MiB of timeline waiting to be written in ${this.dir}`);
    this.#loss = { error: why, entriesLost: entries, outputLinesLost: outputLines };
    this.#pending = [];
    this.#pendingBytes = 0;
    const listener = this.#onFailure;
    if (listener !== null) {
      try {
        listener({ ...this.#loss });
      } catch {
        // The listener's own failure must not turn a store failure into a crash.
      }
    }
  }
}

/**
 * A store write error as one line that says where and why.
 *
 * @example
 * ```ts
 * storeError(enospc, ".brim/runs/x/timeline.ndjson").message;
 * // "the run store cannot write .brim/runs/x/timeline.ndjson: no space left on the device"
 * ```
 */
export function storeError(error: unknown, path: string): BrimError {
  if (error instanceof BrimError) return error;
  return new BrimError("E_IO", `the run store cannot write ${path}: ${ioCause(error)}`, { cause: error });
}
