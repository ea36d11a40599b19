/**
 * brim's one atomic file writer and the wording of its I/O errors, shared by every stage that writes
 * a file a user or a reader may see (configs, the run store, reports). It sits at the root of `src/`
 * beside `bytes.ts`, below every stage, so that each can use it without an import cycle.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, rename, unlink, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { BrimError } from "./errors/index.ts";

/** The mark in the names of brim's temp files: `.<name>.brim-tmp-<pid>-<random>` beside the target. */
export const TEMP_MARK = ".brim-tmp-";

/**
 * The E_IO error for a failed file operation, with the cause in words (one line).
 *
 * @example
 * ```ts
 * throw ioError("read", "conf.yaml", enoentError); // BrimError E_IO "cannot read conf.yaml: no such file"
 * ```
 */
export function ioError(verb: string, path: string, error: unknown): BrimError {
  if (error instanceof BrimError) return error;
  return new BrimError("E_IO", `cannot ${verb} ${path}: ${ioCause(error)}`, { cause: error });
}

/**
 * An I/O error's cause in words: the usual errno codes spelled out, else the error's first line.
 *
 * @example
 * ```ts
 * ioCause(Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" })); // "no space left on the device"
 * ```
 */
export function ioCause(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ENOENT") return "no such file";
  if (code === "EISDIR") return "is a directory";
  if (code === "EACCES" || code === "EPERM") return "permission denied";
  if (code === "ENOSPC") return "no space left on the device";
  if (code === "EDQUOT") return "disk quota exceeded";
  if (code === "EROFS") return "read-only file system";
  if (code === "EIO") return "input/output error";
  const message = error instanceof Error ? error.message : String(error);
  return message.split("\n", 1)[0] ?? message;
}

/**
 * A fresh temp path beside `target` for {@link writeFileAtomic}.
 *
 * @example
 * ```ts
 * tempPathFor("/p/run.json"); // "/p/.run.json.brim-tmp-4242-1f2e3d4c5b6a"
 * ```
 */
export function tempPathFor(target: string): string {
  return join(dirname(target), `.${basename(target)}${TEMP_MARK}${process.pid}-${randomBytes(6).toString("hex")}`);
}

/** How {@link writeFileAtomic} writes. */
export interface AtomicWriteOptions {
  /** The path named in errors (default: `path`). */
  shownPath?: string;
  /** Permission bits of the new file (default 0o666 less the umask). */
  mode?: number;
  /** An owner to give the new file, where the process may. */
  owner?: { uid: number; gid: number };
  /** Create the parent folder first. */
  makeDir?: boolean;
  /** Runs after the temp file is complete and synced, just before the rename; throwing cancels the write. */
  beforeRename?: () => Promise<void>;
}

/**
 * Replaces a file's content atomically: the data goes to a temp file beside it (see
 * {@link tempPathFor}), is fsynced, renamed over the file, and the folder is fsynced. A crash at any
 * moment leaves the old content or the new one, never a mix; a failure (a full or read-only disk)
 * removes the temp file and throws E_IO with a one-line cause.
 *
 * @example
 * ```ts
 * await writeFileAtomic(".brim/runs/20261122-101500-3f2a/run.json", JSON.stringify(meta));
 * ```
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, options: AtomicWriteOptions = {}): Promise<void> {
  const shown = options.shownPath ?? path;
  if (options.makeDir === true) {
    try {
      await mkdir(dirname(path), { recursive: true });
    } catch (error) {
      throw ioError("write", shown, error);
    }
  }
  const temp = tempPathFor(path);
  let handle: FileHandle | undefined;
  try {
    handle = await open(temp, "wx", options.mode ?? 0o666);
    await handle.writeFile(data);
    if (options.mode !== undefined) await handle.chmod(options.mode);
    const owner = options.owner;
    if (owner !== undefined && typeof process.getuid === "function" && (owner.uid !== process.getuid() || owner.gid !== process.getgid?.())) {
      await handle.chown(owner.uid, owner.gid).catch(() => undefined);
    }
    await handle.sync();
    await handle.close();
    handle = undefined;
    await options.beforeRename?.();
    await rename(temp, path);
  } catch (error) {
    await handle?.close().catch(() => undefined);
    await unlink(temp).catch(() => undefined);
    throw ioError("write", shown, error);
  }
  await syncDirectory(dirname(path));
}

/**
 * fsyncs a folder so that a rename in it is durable; a file system that cannot is left alone (the
 * rename itself is still atomic there).
 *
 * @example
 * ```ts
 * await syncDirectory(".brim/runs");
 * ```
 */
export async function syncDirectory(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, "r");
    await handle.sync();
  } catch {
    // Some file systems cannot fsync a directory.
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/**
 * Removes temp files that a killed brim process left beside `target` (`.<name>.brim-tmp-<pid>-*`
 * whose process no longer runs). Returns the paths removed.
 *
 * @example
 * ```ts
 * await removeStaleTemps("conf.yaml"); // ["./.conf.yaml.brim-tmp-4242-1f2e3d4c5b6a"]
 * ```
 */
export async function removeStaleTemps(target: string): Promise<string[]> {
  const dir = dirname(target);
  const prefix = `.${basename(target)}${TEMP_MARK}`;
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(/^(\d+)-[0-9a-f]+$/.exec(name.slice(prefix.length))?.[1]);
    if (!Number.isSafeInteger(pid) || pid === process.pid || isRunning(pid)) continue;
    const path = join(dir, name);
    try {
      await unlink(path);
      removed.push(path);
    } catch {
      // Another brim cleaned it first, or it is not ours to remove.
    }
  }
  return removed;
}

/**
 * True while a process with this pid exists (also when it belongs to another user).
 *
 * @example
 * ```ts
 * isRunning(process.pid); // true
 * ```
 */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
