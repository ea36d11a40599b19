/**
 * The dashboard's access token on a shared machine: made once per store, kept in `<store>/dashboard.token`
 * (mode 0600, so only its owner reads it), and required by every request even on loopback, where
 * every local user can connect. The URL `brim dashboard` prints carries it, like Jupyter's.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import { chmod, open, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { BrimError } from "../errors/index.ts";

/**
 * The file that holds a store's dashboard token.
 *
 * @example
 * ```ts
 * tokenPath(".brim"); // ".brim/dashboard.token"
 * ```
 */
export function tokenPath(storeRoot: string): string {
  return join(storeRoot, "dashboard.token");
}

const TOKEN = /^[A-Za-z0-9_-]{24,128}$/;

/**
 * The store's dashboard token: read from its file, or made (144 random bits) and written 0600 the
 * first time. A token file others can read is made private again (0600) before use. Where the store
 * does not exist yet or cannot be written, the token is this dashboard's only (`path` null).
 *
 * @example
 * ```ts
 * const { token, path } = await storeToken(".brim"); // "q3V…" (24 characters), ".brim/dashboard.token"
 * ```
 */
export async function storeToken(storeRoot: string): Promise<{ token: string; path: string | null }> {
  const path = tokenPath(storeRoot);
  for (let tries = 0; tries < 3; tries++) {
    try {
      const text = (await readFile(path, "utf8")).trim();
      if (!TOKEN.test(text)) throw new BrimError("E_INPUT", `${path} does not hold a dashboard token: remove it and start brim dashboard again`);
      if (((await stat(path)).mode & 0o077) !== 0) await chmod(path, 0o600);
      return { token: text, path };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") {
        if (error instanceof BrimError) throw error;
        throw new BrimError("E_IO", `cannot read the dashboard token ${path}: ${(error as Error).message}`, { cause: error });
      }
    }
    const token = randomBytes(18).toString("base64url");
    try {
      // No store yet: nothing to show, and no folder made just for a token.
      if (
        !(await stat(storeRoot).then(
          (st) => st.isDirectory(),
          () => false,
        ))
      )
        return { token, path: null };
      const handle = await open(path, "wx", 0o600);
      try {
        await handle.writeFile(`${token}\n`);
        await handle.sync();
      } finally {
        await handle.close();
      }
      return { token, path };
    } catch (error) {
      // Another dashboard made it first: read theirs.
      if ((error as NodeJS.ErrnoException).code === "EEXIST") continue;
      // A store brim may not write (read-only, another user's): a token for this dashboard only.
      return { token, path: null };
    }
  }
  throw new BrimError("E_IO", `cannot settle the dashboard token ${path}`);
}
