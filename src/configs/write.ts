/**
 * Writing config files safely: atomic replacement (temp file, fsync, rename), backups that never
 * overwrite an older one, and refusal to write over a file that changed since brim read it.
 *
 * @module
 */
import { createHash, randomBytes } from "node:crypto";
import { link, open, readdir, readFile, realpath, rename, stat, unlink, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { BrimError } from "../errors/index.ts";
import { ioError, readConfig } from "./document.ts";
import { unifiedDiff } from "./diff.ts";
import { editConfigText } from "./edit.ts";
import type { ApplyOptions, ApplyResult, ConfigEdit } from "./types.ts";

const TEMP_MARK = ".brim-tmp-";

/**
 * Replaces a file's content atomically: the text goes to `<dir>/.<name>.brim-tmp-<pid>-<random>`,
 * is fsynced, and is renamed over the file (then the directory is fsynced). A crash at any moment
 * leaves the old content or the new one, never a mix; the worst it leaves is the temp file, which
 * {@link applyConfigEdits} removes on its next run. The file keeps its permission bits (and its
 * owner, where the process may set it); a symbolic link is followed, so the link stays a link.
 *
 * @example
 * ```ts
 * await writeFileAtomic("conf.yaml", "batch_size: 64\n");
 * ```
 */
export async function writeFileAtomic(path: string, text: string): Promise<void> {
  await replaceFile(path, await resolveLink(path), text);
}

/**
 * Reads a config, applies the edits and writes the result atomically, after copying the original
 * to `<name>.brim-backup` (or `.brim-backup.1`, `.2`, … when that exists). Refuses with E_STALE,
 * writing nothing, when `expectedSha256` is given and the file's hash differs — or when the file
 * changes while brim computes the edit. Writes nothing (and makes no backup) when every value is
 * already in place, so applying twice changes nothing.
 *
 * @example
 * ```ts
 * const doc = await readConfig("conf.yaml");
 * const result = await applyConfigEdits("conf.yaml", [{ key: "data_loader.batch_size", value: 128 }], { expectedSha256: doc.sha256 });
 * result.changes;    // [{ key: "data_loader.batch_size", before: 32, after: 128 }]
 * result.backupPath; // "conf.yaml.brim-backup"
 * ```
 */
export async function applyConfigEdits(path: string, edits: readonly ConfigEdit[], options: ApplyOptions = {}): Promise<ApplyResult> {
  const doc = await readConfig(path);
  if (options.expectedSha256 !== undefined && options.expectedSha256 !== doc.sha256) throw staleError(path, options.expectedSha256, doc.sha256);
  const { text, changes } = editConfigText(doc, edits);
  const diff = unifiedDiff(path, doc.text, text);
  if (text === doc.text) return { path, changed: false, changes: [], diff: "", backupPath: null };
  if (options.dryRun === true) return { path, changed: true, changes, diff, backupPath: null };
  const target = await resolveLink(path);
  await removeStaleTemps(target);
  const backupPath = options.backup === false ? null : await writeBackup(target, doc.text);
  const unchangedSince = async () => {
    const now = await hashOf(target);
    if (now !== doc.sha256) throw staleError(path, doc.sha256, now);
  };
  try {
    await replaceFile(path, target, text, unchangedSince);
  } catch (error) {
    if (backupPath !== null) await unlink(backupPath).catch(() => undefined);
    throw error;
  }
  return { path, changed: true, changes, diff, backupPath };
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

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function tempPathFor(target: string): string {
  return join(dirname(target), `.${basename(target)}${TEMP_MARK}${process.pid}-${randomBytes(6).toString("hex")}`);
}

async function resolveLink(path: string): Promise<string> {
  try {
    return await realpath(path);
  } catch {
    return path;
  }
}

async function hashOf(path: string): Promise<string> {
  try {
    return createHash("sha256").update(await readFile(path)).digest("hex");
  } catch (error) {
    throw ioError("read", path, error);
  }
}

function staleError(path: string, expected: string, actual: string): BrimError {
  return new BrimError("E_STALE", `${path} changed since brim read it (sha256 ${expected.slice(0, 12)}… is now ${actual.slice(0, 12)}…); re-run the tune or apply with --force`);
}

async function replaceFile(shownPath: string, target: string, text: string, beforeRename?: () => Promise<void>): Promise<void> {
  let mode: number | undefined;
  let owner: { uid: number; gid: number } | undefined;
  try {
    const st = await stat(target);
    mode = st.mode & 0o7777;
    owner = { uid: st.uid, gid: st.gid };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw ioError("write", shownPath, error);
  }
  const temp = tempPathFor(target);
  let handle: FileHandle | undefined;
  try {
    handle = await open(temp, "wx", mode ?? 0o666);
    await handle.writeFile(text, "utf8");
    if (mode !== undefined) await handle.chmod(mode);
    if (owner !== undefined && typeof process.getuid === "function" && (owner.uid !== process.getuid() || owner.gid !== process.getgid?.())) {
      await handle.chown(owner.uid, owner.gid).catch(() => undefined);
    }
    await handle.sync();
    await handle.close();
    handle = undefined;
    await beforeRename?.();
    await rename(temp, target);
  } catch (error) {
    await handle?.close().catch(() => undefined);
    await unlink(temp).catch(() => undefined);
    throw ioError("write", shownPath, error);
  }
  await syncDirectory(dirname(target));
}

async function writeBackup(target: string, text: string): Promise<string> {
  const temp = tempPathFor(target);
  let handle: FileHandle | undefined;
  try {
    const mode = (await stat(target)).mode & 0o777;
    handle = await open(temp, "wx", mode);
    await handle.writeFile(text, "utf8");
    await handle.sync();
    await handle.close();
    handle = undefined;
    // link() never replaces an existing name, so an older backup is never overwritten, and the
    // backup appears complete or not at all.
    for (let n = 0; ; n++) {
      const backup = `${target}.brim-backup${n === 0 ? "" : `.${n}`}`;
      try {
        await link(temp, backup);
        return backup;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
    }
  } catch (error) {
    throw ioError("back up", target, error);
  } finally {
    await handle?.close().catch(() => undefined);
    await unlink(temp).catch(() => undefined);
    await syncDirectory(dirname(target));
  }
}

async function syncDirectory(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, "r");
    await handle.sync();
  } catch {
    // Some file systems cannot fsync a directory; the rename itself is still atomic there.
  } finally {
    await handle?.close().catch(() => undefined);
  }
}
