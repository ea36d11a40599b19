/**
 * The run store on disk (docs/run-store.md): record ids, one folder per run and per tune, runs
 * created and read, tunes written and read, and what a user types resolved to an id.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import { access, constants as fsConstants, mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { BrimError } from "../errors/index.ts";
import { ioCause } from "../files.ts";
import { parseRunMeta, parseTuneRecord } from "./schema.ts";
import type { RunMeta, TimelineEntry, TuneRecord } from "./types.ts";
import { PRIVATE_DIR, PRIVATE_FILE, RESERVE_BYTES, RESERVE_NAME, realStoreIo, RunWriter, writeJsonAtomic, type StoreIo } from "./writer.ts";

const ID_PATTERN = /^\d{8}-\d{6}-[0-9a-f]{4}$/;

/**
 * A new run or tune id: UTC start time and four random hex digits, so ids sort by time.
 *
 * @example
 * ```ts
 * newRecordId(new Date("2026-11-22T10:15:00Z")); // "20261122-101500-3f2a"
 * ```
 */
export function newRecordId(now: Date = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
  return `${stamp}-${randomBytes(2).toString("hex")}`;
}

/**
 * True when `id` has the shape of a run or tune id. Ids from URLs and command lines pass this check
 * before they are joined to a path, so `../` never reaches the filesystem.
 *
 * @example
 * ```ts
 * isRecordId("20261122-101500-3f2a"); // true
 * isRecordId("../etc");               // false
 * ```
 */
export function isRecordId(id: string): boolean {
  return ID_PATTERN.test(id);
}

/**
 * The store root: `--store`, else `BRIM_STORE`, else `.brim` in `cwd`.
 *
 * @example
 * ```ts
 * storeRoot(undefined, process.env, process.cwd()); // "/home/me/proj/.brim"
 * ```
 */
export function storeRoot(explicit: string | undefined, env: NodeJS.ProcessEnv, cwd: string): string {
  return resolve(cwd, explicit ?? env.BRIM_STORE ?? ".brim");
}

/**
 * Parses the lines of a timeline; skips blank lines, lines that are not JSON objects (a last line still
 * being written) and entries without `t` and `kind`.
 *
 * @example
 * ```ts
 * parseTimeline('{"t":1,"kind":"start","pid":4}\n{"t":2,"ki'); // [{ t: 1, kind: "start", pid: 4 }]
 * ```
 */
export function parseTimeline(text: string): TimelineEntry[] {
  const entries: TimelineEntry[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      continue;
    }
    if (
      typeof value === "object" &&
      value !== null &&
      typeof (value as { t?: unknown }).t === "number" &&
      typeof (value as { kind?: unknown }).kind === "string"
    ) {
      entries.push(value as TimelineEntry);
    }
  }
  return entries;
}

async function readJson(path: string, what: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") throw new BrimError("E_NOT_FOUND", `${what} not found (${path})`);
    throw new BrimError("E_IO", `cannot read ${path}: ${(error as Error).message}`, { cause: error });
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new BrimError("E_PARSE", `${path} is not valid JSON: ${(error as Error).message}`, { cause: error });
  }
}

/** What the user calls and files a record under (`--name`, `--tag`): stamped on every run and tune a store writes. */
export type RecordLabels = Pick<RunMeta, "name" | "tags">;

/** What a new run records before the job starts; the rest of {@link RunMeta} is filled in by the store. */
export type NewRun = Omit<RunMeta, "schema" | "id" | "started_at" | "ended_at" | "end" | "summary">;

/**
 * The run store on disk (docs/run-store.md): one folder per run under `runs/`, per tune under `tunes/`.
 *
 * @example
 * ```ts
 * const store = new RunStore(storeRoot(undefined, process.env, process.cwd()));
 * const latest = await store.resolveRun("latest");
 * const { meta, timeline } = await store.readRun(latest);
 * ```
 */
export class RunStore {
  readonly root: string;
  #io: StoreIo;
  #labels: RecordLabels;

  /**
   * `io` replaces the writers' file calls (tests inject a full disk through it); `labels` (`--name`,
   * `--tag`) go into every run.json and tune.json this store writes, a tune's trials included.
   */
  constructor(root: string, io: StoreIo = realStoreIo, labels: RecordLabels = {}) {
    this.root = root;
    this.#io = io;
    this.#labels = Object.fromEntries(Object.entries(labels).filter(([, v]) => v !== undefined && !(typeof v === "object" && Object.keys(v).length === 0)));
  }

  /** The folder of a run; the id is checked first. */
  runDir(id: string): string {
    return join(this.root, "runs", checkedId(id));
  }

  /** The folder of a tune; the id is checked first. */
  tuneDir(id: string): string {
    return join(this.root, "tunes", checkedId(id));
  }

  /**
   * Creates the run's folder, writes its first run.json and sets aside {@link RESERVE_BYTES}. A store
   * that is full, read-only or missing is E_IO with a one-line cause, and leaves no folder behind.
   */
  async createRun(run: NewRun, startedAt: Date = new Date()): Promise<RunWriter> {
    const id = newRecordId(startedAt);
    const dir = this.runDir(id);
    try {
      await mkdir(dir, { recursive: true, mode: PRIVATE_DIR });
    } catch (error) {
      throw new BrimError(
        "E_IO",
        `cannot create the run folder ${dir}: ${ioCause(await whyNotWritable(dir, error))} (pass --store <dir> for a writable folder with free space)`,
        { cause: error },
      );
    }
    const meta: RunMeta = { schema: "brim.run/v1", id, ...run, ...this.#labels, started_at: startedAt.toISOString(), ended_at: null, end: null, summary: null };
    try {
      await writeJsonAtomic(join(dir, "run.json"), meta);
      await writeFile(join(dir, RESERVE_NAME), Buffer.alloc(RESERVE_BYTES), { mode: PRIVATE_FILE });
      return new RunWriter(dir, meta, this.#io);
    } catch (error) {
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      throw new BrimError(
        "E_IO",
        `cannot start a run in the store ${this.root}: ${ioCause(error)} (pass --store <dir> for a writable folder with free space)`,
        { cause: error },
      );
    }
  }

  /** Ids of the runs in the store, oldest first. */
  async runIds(): Promise<string[]> {
    return listIds(join(this.root, "runs"));
  }

  /** Ids of the tunes in the store, oldest first. */
  async tuneIds(): Promise<string[]> {
    return listIds(join(this.root, "tunes"));
  }

  /** A run's metadata. */
  async readRunMeta(id: string): Promise<RunMeta> {
    const path = join(this.runDir(id), "run.json");
    return parseRunMeta(await readJson(path, `run ${id}`), path);
  }

  /** A run's metadata and timeline as they are now (a running job's timeline is read up to its last whole line). */
  async readRun(id: string): Promise<{ meta: RunMeta; timeline: TimelineEntry[] }> {
    const meta = await this.readRunMeta(id);
    let text = "";
    try {
      text = await readFile(join(this.runDir(id), "timeline.ndjson"), "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw new BrimError("E_IO", `cannot read the timeline of run ${id}: ${(error as Error).message}`);
    }
    return { meta, timeline: parseTimeline(text) };
  }

  /** Writes a tune record (atomically), creating its folder; E_IO with one line when the store refuses. */
  async writeTune(tune: TuneRecord): Promise<void> {
    const dir = this.tuneDir(tune.id);
    try {
      await mkdir(dir, { recursive: true, mode: PRIVATE_DIR });
    } catch (error) {
      throw new BrimError("E_IO", `cannot create the tune folder ${dir}: ${ioCause(await whyNotWritable(dir, error))}`, { cause: error });
    }
    await writeJsonAtomic(join(dir, "tune.json"), { ...tune, ...this.#labels });
  }

  /** A tune record. */
  async readTune(id: string): Promise<TuneRecord> {
    const path = join(this.tuneDir(id), "tune.json");
    return parseTuneRecord(await readJson(path, `tune ${id}`), path);
  }

  /**
   * Resolves what a user typed to a run id: a full id, `latest`, a unique prefix of an id, or a
   * `--name` (the newest run of that name).
   * `E_NOT_FOUND` names what was asked and what exists.
   */
  async resolveRun(ref: string): Promise<string> {
    const ids = await this.runIds();
    return (await this.#byName(ref, ids, (id) => this.readRunMeta(id))) ?? resolveRef(ref, ids, "run", this.root);
  }

  /** Like {@link RunStore.resolveRun}, for tunes. */
  async resolveTune(ref: string): Promise<string> {
    const ids = await this.tuneIds();
    return (await this.#byName(ref, ids, (id) => this.readTune(id))) ?? resolveRef(ref, ids, "tune", this.root);
  }

  // A --name picks the newest record of that name (before an id's prefix); records are read only for a reference that is no id.
  async #byName(ref: string, ids: string[], read: (id: string) => Promise<{ name?: string | undefined }>): Promise<string | null> {
    if (ref === "latest" || ref === "last" || isRecordId(ref)) return null;
    for (const id of [...ids].reverse()) {
      const name = await read(id).then(
        (record) => record.name,
        () => undefined,
      );
      if (name === ref) return id;
    }
    return null;
  }
}

// A recursive mkdir on a read-only file system says ENOENT; the nearest folder that exists says why.
async function whyNotWritable(dir: string, error: unknown): Promise<unknown> {
  if ((error as NodeJS.ErrnoException).code !== "ENOENT") return error;
  let at = dirname(dir);
  while (at !== dirname(at)) {
    try {
      await access(at);
    } catch {
      at = dirname(at);
      continue;
    }
    try {
      await access(at, fsConstants.W_OK);
      return error;
    } catch (denied) {
      return denied;
    }
  }
  return error;
}

function checkedId(id: string): string {
  if (!isRecordId(id)) throw new BrimError("E_INPUT", `'${id}' is not a run or tune id (expected YYYYMMDD-HHMMSS-xxxx)`);
  return id;
}

async function listIds(dir: string): Promise<string[]> {
  try {
    const names = await readdir(dir);
    return names.filter(isRecordId).sort();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw new BrimError("E_IO", `cannot list ${dir}: ${(error as Error).message}`, { cause: error });
  }
}

function resolveRef(ref: string, ids: string[], what: "run" | "tune", root: string): string {
  if (ids.length === 0)
    throw new BrimError("E_NOT_FOUND", `no ${what}s in the store ${root} (run 'brim ${what === "run" ? "run" : "tune"} -- <command>' first, or pass --store)`);
  if (ref === "latest" || ref === "last") return ids[ids.length - 1] as string;
  if (isRecordId(ref) && ids.includes(ref)) return ref;
  if (/^[0-9a-f-]+$/.test(ref)) {
    const matches = ids.filter((id) => id.startsWith(ref) || id.endsWith(ref));
    if (matches.length === 1) return matches[0] as string;
    if (matches.length > 1) throw new BrimError("E_INPUT", `'${ref}' matches ${matches.length} ${what}s; give more of the id`);
  }
  throw new BrimError("E_NOT_FOUND", `${what} '${ref}' not found in ${root} (latest: ${ids[ids.length - 1]})`);
}
