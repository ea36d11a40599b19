/**
 * Setting values in config text. Each edit is one minimal splice, and each result is parsed again
 * and compared with the intended data — the edited key holds the new value and every other key
 * its old one — before the next edit runs, so an edit that would not read back as meant is refused
 * rather than written.
 *
 * @module
 */
import { InputError } from "../errors/index.ts";
import { parsedFormatOf, parseFormat, type ParsedFormat } from "./document.ts";
import { JSON_WORDS, jsonSplice } from "./json.ts";
import { checkEditPath, getAt, isPlainObject, parseKeyPath, sameValue, setAt, type ContainerWords, type KeySegment } from "./keys.ts";
import { applySplice, commentAbove, keepCommentColumn, type Splice } from "./spans.ts";
import { TOML_WORDS, tomlSplice } from "./toml.ts";
import type { ConfigChange, ConfigDocument, ConfigEdit, ConfigFormat, ConfigValue } from "./types.ts";
import { YAML_WORDS, yamlSplice } from "./yaml.ts";

const WORDS: Record<ConfigFormat, ContainerWords> = { yaml: YAML_WORDS, json: JSON_WORDS, toml: TOML_WORDS };

/**
 * Applies edits to a document's text, touching only the spans of the values set (and the lines
 * of keys created). Pure: nothing is read or written. `changes` lists only keys whose value
 * differs; an edit that sets a value already there changes nothing.
 *
 * @example
 * ```ts
 * const doc = parseConfig("data_loader:\n  batch_size: 16  # small\n", "yaml", "conf.yaml");
 * const { text, changes } = editConfigText(doc, [{ key: "data_loader.batch_size", value: 64 }]);
 * // text: "data_loader:\n  batch_size: 64  # small\n"
 * // changes: [{ key: "data_loader.batch_size", before: 16, after: 64 }]
 * ```
 */
export function editConfigText(doc: ConfigDocument, edits: readonly ConfigEdit[]): { text: string; changes: ConfigChange[] } {
  const bom = doc.text.startsWith("\ufeff") ? "\ufeff" : "";
  let body = doc.text.slice(bom.length);
  let parsed = parsedFormatOf(doc);
  const changes = new Map<string, ConfigChange>();
  for (const edit of edits) {
    const segments = parseKeyPath(edit.key);
    const value = checkValue(edit, doc.path);
    if (edit.baseline !== undefined && sameValue(edit.baseline, value)) continue;
    const before = getAt(parsed.data, segments);
    if (before !== undefined && sameValue(before, value)) continue;
    const root = parsed.empty ? {} : parsed.data;
    checkEditPath(root, segments, edit.key, doc.path, WORDS[doc.format]);
    const splice = spliceFor(parsed, body, segments, value, doc.path);
    const spliced = applySplice(body, splice);
    const expected = cloneData(root);
    setAt(expected, segments, value);
    // the note goes on the line above a key that was there: a key created has no line of its own to annotate yet
    const next = edit.comment !== undefined && doc.format !== "json" && before !== undefined ? commentAbove(spliced, splice.start, edit.comment) : spliced;
    parsed = verify(next, expected, segments, value, doc, edit.key);
    body = next;
    const id = JSON.stringify(segments.map((s) => s.name));
    const seen = changes.get(id);
    if (seen === undefined) changes.set(id, { key: edit.key, before, after: value });
    else seen.after = value;
  }
  return { text: bom + body, changes: [...changes.values()].filter((c) => !sameValue(c.before, c.after)) };
}

function spliceFor(parsed: ParsedFormat, text: string, segments: readonly KeySegment[], value: ConfigValue, file: string): Splice {
  if (parsed.format === "yaml") return keepCommentColumn(text, yamlSplice(parsed.yaml, text, segments, value, file));
  if (parsed.format === "json") return jsonSplice(parsed.json, text, segments, value);
  return keepCommentColumn(text, tomlSplice(parsed.toml, text, segments, value, file));
}

function verify(next: string, expected: unknown, segments: readonly KeySegment[], value: ConfigValue, doc: ConfigDocument, key: string): ParsedFormat {
  let reparsed: ParsedFormat;
  try {
    reparsed = parseFormat(next, doc.format, doc.path);
  } catch (error) {
    throw new InputError(
      `cannot be set safely: the edited file would not parse (${(error as Error).message}); edit it by hand`,
      { file: doc.path, field: key },
      { cause: error },
    );
  }
  if (sameValue(reparsed.data, expected)) return reparsed;
  const got = getAt(reparsed.data, segments);
  const why = sameValue(got, value)
    ? "other keys would change with it"
    : `it would read back as ${JSON.stringify(got) ?? "nothing"}, not ${JSON.stringify(value)}`;
  throw new InputError(`cannot be set safely: ${why}; edit it by hand`, { file: doc.path, field: key });
}

function checkValue(edit: ConfigEdit, file: string): ConfigValue {
  const value: unknown = edit.value;
  const field = edit.key;
  if (value === null || typeof value === "boolean") return value;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new InputError(`must be a finite number, got ${String(value)}`, { file, field });
    return value === 0 ? 0 : value;
  }
  if (typeof value === "string") {
    if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(value))
      throw new InputError("the string holds a lone UTF-16 surrogate, which UTF-8 cannot store", { file, field });
    return value;
  }
  throw new InputError(`must be a string, a number, a boolean or null, got ${Array.isArray(value) ? "an array" : typeof value}`, { file, field });
}

function cloneData(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(cloneData);
  if (!isPlainObject(value)) return value;
  const copy: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) Object.defineProperty(copy, k, { value: cloneData(v), writable: true, enumerable: true, configurable: true });
  return copy;
}
