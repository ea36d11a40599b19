/**
 * The shapes the config editor takes and gives.
 *
 * @module
 */

/**
 * A config file's format, as its extension tells it.
 *
 * @example
 * ```ts
 * const format: ConfigFormat = formatOf("conf.yml"); // "yaml"
 * ```
 */
export type ConfigFormat = "yaml" | "json" | "toml";

/**
 * A value brim writes into a config: a single scalar.
 *
 * @example
 * ```ts
 * const values: ConfigValue[] = [64, true, "bf16-mixed", null];
 * ```
 */
export type ConfigValue = string | number | boolean | null;

/**
 * A config file as read: its text, the SHA-256 of its bytes (to refuse writing over a file that
 * changed since), and its parsed data.
 *
 * @example
 * ```ts
 * const doc = await readConfig("examples/nbeats/config.yaml");
 * doc.get("data_loader.batch_size"); // 32
 * doc.get("data_loader.nope");       // undefined
 * ```
 */
export interface ConfigDocument {
  path: string;
  format: ConfigFormat;
  text: string;
  sha256: string;
  /** The whole parsed file as plain data (mappings as objects, lists as arrays, TOML dates as Date). */
  data: unknown;
  /** The value at a dotted key (see docs/configs.md), `undefined` when absent. */
  get(key: string): unknown;
}

/**
 * One value to set: `key` is a dotted path (`stages.1.batch_size`, `"a.b".c`).
 *
 * @example
 * ```ts
 * const edit: ConfigEdit = { key: "training.precision", value: "bf16-mixed" };
 * ```
 */
export interface ConfigEdit {
  key: string;
  value: ConfigValue;
  /**
   * The value the key held when the tune read the file (its baseline trial). An edit whose value is
   * its baseline is one the tune did not change, and is skipped: the file keeps what it holds now
   * (a value the user set since is not reverted, with `--force` too).
   */
  baseline?: ConfigValue;
  /**
   * A note written as a comment on the line above the key when its value changes (YAML and TOML;
   * JSON has no comments): one line, starting `brim`; a comment brim wrote there before is replaced.
   */
  comment?: string;
}

/**
 * A key whose value an edit changed; `before` is `undefined` for a key the edit created.
 *
 * @example
 * ```ts
 * const change: ConfigChange = { key: "data_loader.batch_size", before: 32, after: 128 };
 * ```
 */
export interface ConfigChange {
  key: string;
  before: unknown;
  after: unknown;
}

/**
 * What {@link applyConfigEdits} did (or, with `dryRun`, would do). `changed` is false when every
 * value was already in place; `backupPath` is the copy of the original, when one was made.
 *
 * @example
 * ```ts
 * const result: ApplyResult = await applyConfigEdits("conf.yaml", [{ key: "a", value: 1 }]);
 * if (result.changed) process.stdout.write(result.diff);
 * ```
 */
export interface ApplyResult {
  path: string;
  changed: boolean;
  changes: ConfigChange[];
  diff: string;
  backupPath: string | null;
}

/**
 * Options of {@link applyConfigEdits}.
 *
 * @example
 * ```ts
 * const options: ApplyOptions = { expectedSha256: doc.sha256, backup: true, dryRun: false };
 * ```
 */
export interface ApplyOptions {
  /** Refuse (E_STALE) when the file's SHA-256 is no longer this one. */
  expectedSha256?: string;
  /** Copy the original to `<name>.brim-backup[.N]` before writing (default true). */
  backup?: boolean;
  /** Compute the changes and the diff, write nothing. */
  dryRun?: boolean;
}
