/**
 * `--name` and `--tag key=value`: what the user calls a run or a tune and files it under, kept in
 * its record (run.json / tune.json), shown by `brim runs` and the dashboard, and picked by.
 *
 * @module
 */
import type { Command } from "commander";
import { UsageError } from "../errors/index.ts";
import type { RecordLabels } from "../record/store.ts";

const NAME = /^[^\s/\\][^\n\r\t/\\]{0,99}$/;
const TAG_KEY = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;

/**
 * A `--name`: 1 to 100 characters, no line break, tab or slash, not starting with a space.
 *
 * @example
 * ```ts
 * parseRecordName("bs64 bf16"); // "bs64 bf16"
 * ```
 */
export function parseRecordName(text: string): string {
  if (!NAME.test(text) || text.trim() !== text)
    throw new UsageError(`--name '${text}': give 1 to 100 characters without a slash, tab or line break, e.g. --name bs64-bf16`);
  return text;
}

/**
 * One `--tag key=value` added to those before it (the key: letters, digits, `_ . -`, starting with a
 * letter or `_`; the value: up to 200 characters).
 *
 * @example
 * ```ts
 * parseTag("model=resnet50", {}); // { model: "resnet50" }
 * ```
 */
export function parseTag(text: string, previous: Record<string, string> = {}): Record<string, string> {
  const equals = text.indexOf("=");
  const key = equals < 0 ? text : text.slice(0, equals);
  const value = equals < 0 ? "" : text.slice(equals + 1);
  if (equals < 0 || !TAG_KEY.test(key) || value.length > 200 || /[\n\r]/.test(value))
    throw new UsageError(`--tag '${text}': give key=value, the key of letters, digits, '_', '.', '-' (e.g. --tag model=resnet50)`);
  return { ...previous, [key]: value };
}

/**
 * Adds `--name` and `--tag` to a command.
 *
 * @example
 * ```ts
 * labelOptions(program.command("run"));
 * ```
 */
export function labelOptions(command: Command): Command {
  return command
    .option("--name <name>", "what to call this record (shown by brim runs and the dashboard; picks it: brim report <name>)", parseRecordName)
    .option("--tag <key=value>", "file the record under key=value (repeatable; brim runs --tag key=value lists them)", parseTag);
}

/**
 * The record labels from the parsed options.
 *
 * @example
 * ```ts
 * recordLabels({ name: "a", tag: { model: "x" } }); // { name: "a", tags: { model: "x" } }
 * ```
 */
export function recordLabels(options: { name?: string; tag?: Record<string, string> }): RecordLabels {
  return { ...(options.name !== undefined ? { name: options.name } : {}), ...(options.tag !== undefined ? { tags: options.tag } : {}) };
}
