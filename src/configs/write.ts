/**
 * Writing config files safely: atomic replacement (temp file, fsync, rename), backups that never
 * overwrite an older one, and refusal to write over a file that changed since brim read it.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { constants as fsConstants } from "node:fs";
import { access, link, open, readFile, realpath, stat, unlink, type FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import { BrimError } from "../errors/index.ts";
import { ioError, removeStaleTemps, syncDirectory, tempPathFor, writeFileAtomic as writeAtomic } from "../files.ts";
import { readConfig } from "./document.ts";
import { unifiedDiff } from "./diff.ts";
import { editConfigText } from "./edit.ts";
import type { ApplyOptions, ApplyResult, ConfigEdit } from "./types.ts";

/**
 * Replaces a config's content atomically through brim's one atomic writer (src/files.ts): the text
 * goes to `<dir>/.<name>.brim-tmp-<pid>-<random>`, is fsynced, and is renamed over the file (then the
 * directory is fsynced). A crash at any moment
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
  await refuseReadOnly(path, target);
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

// A rename replaces a file whatever its mode: a file its owner made read-only is refused here instead.
async function refuseReadOnly(shown: string, target: string): Promise<void> {
  let mode: number;
  try {
    mode = (await stat(target)).mode & 0o777;
  } catch {
    return;
  }
  let writable = true;
  try {
    await access(target, fsConstants.W_OK);
  } catch {
    writable = false;
  }
  if ((mode & 0o222) === 0 || !writable)
    throw new BrimError(
      "E_INPUT",
      `${shown} is read-only (mode ${mode.toString(8).padStart(4, "0")}): brim does not write it; make it writable (chmod u+w) to apply, or set the values by hand`,
    );
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
    return createHash("sha256")
      .update(await readFile(path))
      .digest("hex");
  } catch (error) {
    throw ioError("read", path, error);
  }
}

function staleError(path: string, expected: string, actual: string): BrimError {
  return new BrimError(
    "E_STALE",
    `${path} changed since brim read it (sha256 ${expected.slice(0, 12)}… is now ${actual.slice(0, 12)}…); re-run the tune or apply with --force`,
  );
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
  await writeAtomic(target, text, {
    shownPath,
    ...(mode !== undefined ? { mode } : {}),
    ...(owner !== undefined ? { owner } : {}),
    ...(beforeRename ? { beforeRename } : {}),
  });
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
