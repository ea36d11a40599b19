import { createRequire } from "node:module";

/**
 * brim's version, from its package.json.
 *
 * @example
 * ```ts
 * BRIM_VERSION; // "0.1.0"
 * ```
 */
export const BRIM_VERSION: string = (createRequire(import.meta.url)("../package.json") as { version: string }).version;
