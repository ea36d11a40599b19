/**
 * Reading and editing the user's own config files (YAML, JSON, TOML) so that only the values set
 * change: every other byte — comments, blank lines, key order, indentation, quoting — stays as it
 * was. Writes are atomic, backed up, and refused over a file that changed since brim read it.
 * Key syntax and guarantees: docs/configs.md.
 *
 * @example
 * ```ts
 * import { applyConfigEdits, readConfig } from "./configs/index.ts";
 * const doc = await readConfig("examples/nbeats/config.yaml");
 * const result = await applyConfigEdits(doc.path, [
 *   { key: "data_loader.batch_size", value: 256 },
 *   { key: "training.precision", value: "bf16-mixed" },
 * ], { expectedSha256: doc.sha256 });
 * process.stdout.write(result.diff);
 * ```
 * @module
 */
export type { ApplyOptions, ApplyResult, ConfigChange, ConfigDocument, ConfigEdit, ConfigFormat, ConfigValue } from "./types.ts";
export { formatOf, parseConfig, readConfig } from "./document.ts";
export { editConfigText } from "./edit.ts";
export { unifiedDiff } from "./diff.ts";
export { applyConfigEdits, writeFileAtomic } from "./write.ts";
export { removeStaleTemps } from "../files.ts";
export { formatKeyPath, parseKeyPath, type KeySegment } from "./keys.ts";
export {
  brimCopiesOf,
  COPY_KINDS,
  copyPathOf,
  interruptedMessage,
  planCopyState,
  removeStaleTrialCopies,
  trialCopiesOf,
  tuneState,
  type BrimCopy,
  type CopyKind,
  type TrialCopy,
} from "./trial-copies.ts";
