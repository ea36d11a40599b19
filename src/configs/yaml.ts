/**
 * YAML edits as minimal spans: `yaml`'s Document model finds the node and its source range, and
 * only that range changes; comments, blank lines, indentation and every other byte stay as they
 * were. The Document is never printed back, because its printer reflows spacing and comments.
 *
 * @module
 */
import { isAlias, isMap, isScalar, isSeq, parseDocument, visit, type Document, type Node, type Pair, type ParsedNode, type Scalar, type YAMLMap } from "yaml";
import { BrimError, InputError } from "../errors/index.ts";
import { formatKeyPath, type ContainerWords, type KeySegment } from "./keys.ts";
import { eolOf, lineEndOf, lineStartOf, parseFailure, type Splice } from "./spans.ts";
import type { ConfigValue } from "./types.ts";

/**
 * A parsed YAML config: the Document (for its ranges) and its plain data. `empty` is true for a
 * document with no content at all (empty, comments only, a bare `---`).
 *
 * @example
 * ```ts
 * const parsed = parseYaml("data_loader:\n  batch_size: 16\n", "conf.yaml");
 * parsed.data; // { data_loader: { batch_size: 16 } }
 * ```
 */
export interface ParsedYaml {
  doc: Document.Parsed;
  data: unknown;
  empty: boolean;
}

/** YAML's names for its containers. */
export const YAML_WORDS: ContainerWords = { mapping: "mapping", list: "list" };

/**
 * Parses YAML 1.2 with merge keys (`<<: *base`) resolved in the data, as PyYAML and OmegaConf do.
 * One document per file; bad syntax throws E_PARSE with `path:line:col`.
 *
 * @example
 * ```ts
 * parseYaml("a: [1,\n", "conf.yaml"); // throws BrimError E_PARSE "conf.yaml:2:1: not valid YAML: …"
 * ```
 */
export function parseYaml(text: string, file: string): ParsedYaml {
  // The library's own duplicate-key check is quadratic in a mapping's size (40,000 keys: about a
  // minute); brim checks keys itself in one pass and refuses absurd sizes with one line.
  const doc = parseDocument(text, { merge: true, prettyErrors: false, uniqueKeys: false });
  const error = doc.errors[0];
  if (error !== undefined) throw parseFailure(file, text, error.pos[0], "YAML", error.message);
  checkMappings(doc, text, file);
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 10_000 });
  } catch (cause) {
    throw new BrimError("E_PARSE", `${file}: not valid YAML: ${(cause as Error).message}`, { cause });
  }
  const root = doc.contents;
  const empty = root === null || (isScalar(root) && root.value === null && root.range[0] === root.range[1]);
  return { doc, data, empty };
}

/** The most keys brim accepts in one YAML mapping of a config. */
export const MAX_YAML_KEYS_PER_MAPPING = 10_000;

function checkMappings(doc: Document.Parsed, text: string, file: string): void {
  visit(doc, {
    Map(_key, node) {
      if (node.items.length > MAX_YAML_KEYS_PER_MAPPING) {
        throw new BrimError(
          "E_INPUT",
          `${file}: a mapping with ${node.items.length} keys (brim reads configs with up to ${MAX_YAML_KEYS_PER_MAPPING} keys per mapping)`,
        );
      }
      const seen = new Set<string>();
      for (const pair of node.items) {
        const key = pair.key;
        if (!isScalar(key) || key.value === "<<") continue;
        const name = `${typeof key.value}:${String(key.value)}`;
        if (seen.has(name)) throw parseFailure(file, text, key.range?.[0] ?? 0, "YAML", "Map keys must be unique");
        seen.add(name);
      }
    },
  });
}

/**
 * The splice that sets `segments` to `value`: the value's own range when the key exists, else a
 * new `key: value` line at the end of its mapping (creating missing mappings on the way). The
 * caller has checked the path against the data ({@link checkEditPath}).
 *
 * @example
 * ```ts
 * const text = "a:\n  b: 1  # note\n";
 * yamlSplice(parseYaml(text, "c.yaml"), text, parseKeyPath("a.b"), 2, "c.yaml"); // { start: 8, end: 9, insert: "2" }
 * ```
 */
export function yamlSplice(parsed: ParsedYaml, text: string, segments: readonly KeySegment[], value: ConfigValue, file: string): Splice {
  const { doc } = parsed;
  const key = formatKeyPath(segments);
  const shared = aliasedNodes(doc);
  const refuseShared = (node: unknown, i: number) => {
    if (!shared.has(node)) return;
    const where = i === 0 ? "the document root" : formatKeyPath(segments.slice(0, i));
    const anchor = (node as Node).anchor ?? "";
    throw new InputError(`${where} has the anchor &${anchor}, which aliases (*${anchor}) reuse; setting it here would change them too, so edit it by hand`, {
      file,
      field: key,
    });
  };
  if (parsed.empty) return { start: text.length, end: text.length, insert: appendToEmpty(text, segments, value) };
  let node: unknown = doc.contents;
  let inFlow = false;
  for (const [i, segment] of segments.entries()) {
    const where = i === 0 ? "the document root" : formatKeyPath(segments.slice(0, i));
    if (isAlias(node))
      throw new InputError(`${where} is the alias *${node.source}; set the key under its anchor &${node.source} instead`, { file, field: key });
    refuseShared(node, i);
    const last = i === segments.length - 1;
    if (isMap(node)) {
      inFlow ||= node.flow === true;
      const pair = findPair(node, segment.name);
      if (pair === undefined) return insertIntoMap(doc, text, node as YAMLMap<ParsedNode, ParsedNode | null>, segments.slice(i), value, inFlow);
      if (last) {
        refuseShared(pair.value, i + 1);
        return replaceValue(text, pair.value, value, inFlow, file, key);
      }
      node = pair.value;
    } else if (isSeq(node) && segment.index !== undefined) {
      inFlow ||= node.flow === true;
      const item: unknown = node.items[segment.index];
      if (last) {
        refuseShared(item, i + 1);
        return replaceValue(text, item, value, inFlow, file, key);
      }
      node = item;
    } else {
      throw new InputError(`${where} is not a ${YAML_WORDS.mapping}`, { file, field: key });
    }
  }
  throw new InputError("an empty key", { file, field: key });
}

/**
 * The YAML text of one scalar. Strings keep `style` where it can hold them (single or double
 * quotes); otherwise they are plain when YAML 1.2 and 1.1 (PyYAML) both read them back as the same
 * string, else double-quoted. Numbers in exponent form get a `.0` so that PyYAML reads a float.
 *
 * @example
 * ```ts
 * renderYamlScalar("bf16-mixed", undefined, false); // "bf16-mixed"
 * renderYamlScalar("yes", undefined, false);        // '"yes"' (PyYAML would read a boolean)
 * renderYamlScalar(1e-7, undefined, false);         // "1.0e-7"
 * ```
 */
export function renderYamlScalar(value: ConfigValue, style: Scalar.Type | undefined, inFlow: boolean): string {
  if (value === null) return "null";
  if (typeof value === "boolean") return String(value);
  if (typeof value === "number") {
    const s = String(value);
    return s.includes("e") && !s.includes(".") ? s.replace("e", ".0e") : s;
  }
  if (style === "QUOTE_SINGLE" && !/[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]/.test(value)) return `'${value.replaceAll("'", "''")}'`;
  if (style !== "QUOTE_DOUBLE" && isPlainSafe(value, inFlow, "value")) return value;
  return doubleQuoted(value);
}

function doubleQuoted(value: string): string {
  return JSON.stringify(value).replace(/[\x7f-\x9f\u2028\u2029\ufeff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function isPlainSafe(s: string, inFlow: boolean, role: "key" | "value"): boolean {
  if (s === "" || s.trim() !== s || /[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]/.test(s)) return false;
  // PyYAML resolves a plain `=` (YAML 1.1's value type) and `<<` (merge) to tags its safe loader rejects.
  if (s === "=" || s === "<<") return false;
  if (inFlow && /[,[\]{}]/.test(s)) return false;
  const sources = role === "key" ? [`${s}: 0`] : [`k: ${s}`, ...(inFlow ? [`{k: ${s}}`] : [])];
  return (["1.2", "1.1"] as const).every((version) =>
    sources.every((source) => {
      const doc = parseDocument(source, { version, prettyErrors: false });
      if (doc.errors.length > 0 || doc.warnings.length > 0 || !isMap(doc.contents)) return false;
      const pair = doc.contents.items[0];
      const node = role === "key" ? pair?.key : pair?.value;
      return doc.contents.items.length === 1 && isScalar(node) && node.type === "PLAIN" && node.value === s;
    }),
  );
}

function yamlKey(name: string, inFlow: boolean): string {
  return isPlainSafe(name, inFlow, "key") ? name : doubleQuoted(name);
}

function findPair(map: YAMLMap, name: string): Pair | undefined {
  let found: Pair | undefined;
  for (const pair of map.items) {
    const k: unknown = isScalar(pair.key) ? pair.key.value : undefined;
    if ((typeof k === "string" || typeof k === "number" || typeof k === "boolean" || typeof k === "bigint") && String(k) === name) found = pair;
  }
  return found;
}

function aliasedNodes(doc: Document.Parsed): Set<unknown> {
  const targets = new Set<unknown>();
  visit(doc, {
    Alias(_, alias) {
      targets.add(alias.resolve(doc));
    },
  });
  return targets;
}

function replaceValue(text: string, node: unknown, value: ConfigValue, inFlow: boolean, file: string, key: string): Splice {
  if (isAlias(node)) {
    const [start, end] = node.range ?? [0, 0];
    return { start, end, insert: renderYamlScalar(value, undefined, inFlow) };
  }
  if (!isScalar(node) || node.range === undefined || node.range === null) throw new InputError("has no value brim can replace", { file, field: key });
  const [start, end] = node.range;
  if (start === end) {
    const before = start > 0 && /[ \t]/.test(text[start - 1] ?? "") ? "" : " ";
    const after = text[start] === "#" ? " " : "";
    return { start, end, insert: before + renderYamlScalar(value, undefined, inFlow) + after };
  }
  if (node.type === "BLOCK_LITERAL" || node.type === "BLOCK_FOLDED") {
    // The range of a block scalar runs to the start of the next line; keep that line break.
    const eolEnd = lineEndOf(text, end);
    return { start, end: eolEnd, insert: renderYamlScalar(value, node.type, inFlow) };
  }
  return { start, end, insert: renderYamlScalar(value, node.type, inFlow) };
}

function insertIntoMap(
  doc: Document.Parsed,
  text: string,
  map: YAMLMap<ParsedNode, ParsedNode | null>,
  rest: readonly KeySegment[],
  value: ConfigValue,
  inFlow: boolean,
): Splice {
  const flow = inFlow || map.flow === true;
  const leaf = renderYamlScalar(value, undefined, flow);
  if (map.flow === true) {
    const nested = rest.reduceRight((inner, segment, i) => `${yamlKey(segment.name, true)}: ${i === rest.length - 1 ? inner : `{${inner}}`}`, leaf);
    const last = map.items.at(-1);
    if (last === undefined) {
      const open = (map.range?.[0] ?? -1) + 1;
      return { start: open, end: open, insert: nested };
    }
    const end = (last.value ?? last.key).range[1];
    return { start: end, end, insert: `, ${nested}` };
  }
  const first = map.items[0];
  const last = map.items.at(-1);
  if (first === undefined || last === undefined) throw new BrimError("E_INTERNAL", "a block mapping without items");
  const column = first.key.range[0] - lineStartOf(text, first.key.range[0]);
  const at = lineEndOf(text, (last.value ?? last.key).range[1]);
  return { start: at, end: at, insert: blockLines(rest, leaf, column, indentStep(doc, text), eolOf(text), flow) };
}

function appendToEmpty(text: string, segments: readonly KeySegment[], value: ConfigValue): string {
  const eol = eolOf(text);
  const lead = text === "" || text.endsWith("\n") ? "" : eol;
  return lead + blockLines(segments, renderYamlScalar(value, undefined, false), 0, 2, eol, false).slice(eol.length) + eol;
}

function blockLines(rest: readonly KeySegment[], leaf: string, column: number, step: number, eol: string, inFlow: boolean): string {
  return rest.map((segment, i) => `${eol}${" ".repeat(column + i * step)}${yamlKey(segment.name, inFlow)}:${i === rest.length - 1 ? ` ${leaf}` : ""}`).join("");
}

function indentStep(doc: Document.Parsed, text: string): number {
  let step = 0;
  visit(doc, {
    Pair(_, pair) {
      const child = pair.value;
      if (!isMap(child) || child.flow === true || !isScalar(pair.key)) return undefined;
      const inner = child.items[0]?.key;
      const outer = pair.key.range;
      if (!isScalar(inner) || inner.range === undefined || inner.range === null || outer === undefined || outer === null) return undefined;
      const diff = inner.range[0] - lineStartOf(text, inner.range[0]) - (outer[0] - lineStartOf(text, outer[0]));
      if (diff > 0) {
        step = diff;
        return visit.BREAK;
      }
      return undefined;
    },
  });
  return step > 0 ? step : 2;
}
