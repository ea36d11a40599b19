/**
 * TOML edits as minimal spans, located with toml-eslint-parser's ranges. A value that exists is
 * replaced in place; a new key goes at the end of its table — as a dotted key where its table is
 * defined by dotted keys or lives in an array of tables, else under a new `[table]` at the end.
 *
 * @module
 */
import { getStaticTOMLValue, parseTOML, ParseError, type AST } from "toml-eslint-parser";
import { BrimError, InputError } from "../errors/index.ts";
import { formatKeyPath, type ContainerWords, type KeySegment } from "./keys.ts";
import { eolOf, indentOf, lineEndOf, lineStartOf, parseFailure, type Splice } from "./spans.ts";
import type { ConfigValue } from "./types.ts";

type Path = readonly (string | number)[];

/** Where key/value pairs live: the root table, a `[table]` / `[[array]]` entry, or an inline table. */
interface Container {
  path: Path;
  kind: "root" | "table" | "inline";
  node: AST.TOMLTopLevelTable | AST.TOMLTable | AST.TOMLInlineTable;
  pairs: AST.TOMLKeyValue[];
}

/**
 * A parsed TOML config: the AST, every container and every value by path, and the plain data.
 *
 * @example
 * ```ts
 * parseToml("[data_loader]\nbatch_size = 16\n", "c.toml").data; // { data_loader: { batch_size: 16 } }
 * ```
 */
export interface ParsedToml {
  ast: AST.TOMLProgram;
  data: unknown;
  containers: Container[];
  values: Map<string, AST.TOMLContentNode>;
}

/** TOML's names for its containers. */
export const TOML_WORDS: ContainerWords = { mapping: "table", list: "array" };

/**
 * Parses TOML (1.0, and 1.1 where it is more lenient), throwing E_PARSE with `path:line:col`.
 *
 * @example
 * ```ts
 * parseToml("a = \n", "c.toml"); // throws BrimError E_PARSE "c.toml:1:5: not valid TOML: Unspecified values are invalid"
 * ```
 */
export function parseToml(text: string, file: string): ParsedToml {
  const deep = tomlNesting(text);
  if (deep !== null) throw parseFailure(file, text, deep, "TOML", `nested deeper than ${MAX_TOML_DEPTH} levels (brim reads configs up to that depth)`);
  try {
    return parseTomlChecked(text, file);
  } catch (error) {
    if (error instanceof RangeError) throw new BrimError("E_PARSE", `${file}: not valid TOML for brim: too deeply nested to read`, { cause: error });
    throw error;
  }
}

/** The deepest nesting of arrays, inline tables and dotted keys brim reads in a TOML config. */
export const MAX_TOML_DEPTH = 64;

/**
 * The offset where `text` first nests arrays, inline tables or dotted key parts deeper than
 * {@link MAX_TOML_DEPTH}, or null. Strings and comments are skipped; the scan is linear and keeps no
 * stack, so it cannot itself run out of one.
 */
function tomlNesting(text: string): number | null {
  let depth = 0;
  let dots = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "#") {
      while (i < text.length && text[i] !== "\n") i++;
      dots = 0;
    } else if (c === '"' || c === "'") {
      const triple = text.startsWith(c.repeat(3), i);
      const close = triple ? c.repeat(3) : c;
      i += close.length;
      while (i < text.length && !text.startsWith(close, i)) {
        if (c === '"' && text[i] === "\\") i++;
        else if (!triple && text[i] === "\n") break;
        i++;
      }
      i += close.length - 1;
    } else if (c === "[" || c === "{") {
      if (++depth > MAX_TOML_DEPTH) return i;
    } else if (c === "]" || c === "}") {
      depth = Math.max(0, depth - 1);
    } else if (c === ".") {
      if (++dots > MAX_TOML_DEPTH) return i;
    } else if (c === "\n" || c === "=" || c === ",") {
      dots = 0;
    }
  }
  return null;
}

function parseTomlChecked(text: string, file: string): ParsedToml {
  let ast: AST.TOMLProgram;
  try {
    ast = parseTOML(text);
  } catch (error) {
    if (error instanceof ParseError) throw parseFailure(file, text, error.index, "TOML", error.message);
    throw new BrimError("E_PARSE", `${file}: not valid TOML: ${(error as Error).message}`, { cause: error });
  }
  const top = ast.body[0];
  const containers: Container[] = [];
  const values = new Map<string, AST.TOMLContentNode>();
  const rootPairs = top.body.filter((n): n is AST.TOMLKeyValue => n.type === "TOMLKeyValue");
  const addPairs = (base: Path, pairs: AST.TOMLKeyValue[]) => {
    for (const pair of pairs) addValue([...base, ...pair.key.keys.map(keyName)], pair.value);
  };
  const addValue = (path: Path, node: AST.TOMLContentNode) => {
    values.set(pathId(path), node);
    if (node.type === "TOMLInlineTable") {
      containers.push({ path, kind: "inline", node, pairs: node.body });
      addPairs(path, node.body);
    } else if (node.type === "TOMLArray") {
      node.elements.forEach((element, i) => addValue([...path, i], element));
    }
  };
  containers.push({ path: [], kind: "root", node: top, pairs: rootPairs });
  addPairs([], rootPairs);
  for (const table of top.body) {
    if (table.type !== "TOMLTable") continue;
    containers.push({ path: table.resolvedKey, kind: "table", node: table, pairs: table.body });
    addPairs(table.resolvedKey, table.body);
  }
  return { ast, data: getStaticTOMLValue(ast), containers, values };
}

/**
 * The splice that sets `segments` to `value`. The caller has checked the path against the data.
 *
 * @example
 * ```ts
 * const text = "[training]\nprecision = 'fp32'  # note\n";
 * tomlSplice(parseToml(text, "c.toml"), text, parseKeyPath("training.precision"), "bf16-mixed", "c.toml");
 * // { start: 23, end: 29, insert: "'bf16-mixed'" }
 * ```
 */
export function tomlSplice(parsed: ParsedToml, text: string, segments: readonly KeySegment[], value: ConfigValue, file: string): Splice {
  const key = formatKeyPath(segments);
  if (value === null) throw new InputError("TOML has no null; remove the key by hand, or give it a value", { file, field: key });
  const target = segments.map((s) => s.name);
  const existing = parsed.values.get(pathId(target));
  if (existing !== undefined) {
    if (existing.type !== "TOMLValue") throw new InputError("holds a table or an array; brim only sets single values", { file, field: key });
    return { start: existing.range[0], end: existing.range[1], insert: renderTomlValue(value, existing) };
  }
  const parent = target.slice(0, -1);
  let container = parsed.containers[0];
  for (const c of parsed.containers) {
    if (c.path.length <= parent.length && c.path.length >= (container?.path.length ?? 0) && c.path.every((p, i) => String(p) === parent[i])) container = c;
  }
  if (container === undefined) throw new BrimError("E_INTERNAL", "a TOML document without a root table");
  const rest = target.slice(container.path.length);
  const line = `${rest.map(tomlKey).join(".")} = ${renderTomlValue(value, undefined)}`;
  if (rest.length > 1) {
    let best: AST.TOMLKeyValue | undefined;
    let bestShared = 0;
    for (const pair of container.pairs) {
      const names = pair.key.keys.map(keyName);
      let shared = 0;
      while (shared < names.length && shared < rest.length - 1 && names[shared] === rest[shared]) shared++;
      if (shared > 0 && shared >= bestShared) {
        best = pair;
        bestShared = shared;
      }
    }
    if (best !== undefined) return pairAfter(text, container, best, line);
    const throughArray = parsed.containers.some(
      (c) => c.path.some((p) => typeof p === "number") && c.path.length <= parent.length && c.path.every((p, i) => String(p) === parent[i]),
    );
    if (container.kind === "root" && !throughArray) return newTable(text, parent, `${tomlKey(target.at(-1) ?? "")} = ${renderTomlValue(value, undefined)}`);
  }
  const last = container.pairs.at(-1);
  if (last !== undefined) return pairAfter(text, container, last, line);
  return firstPair(text, container, line);
}

/**
 * The TOML text of one value. A string keeps the literal style (`'…'`) of the value it replaces
 * when it can hold it, else it is a basic string; an integer that replaces a float is written as
 * a float (`2.0`) so that the key keeps its type.
 *
 * @example
 * ```ts
 * renderTomlValue("bf16-mixed", undefined); // '"bf16-mixed"'
 * renderTomlValue(1e-5, undefined);         // "1e-5"
 * ```
 */
export function renderTomlValue(value: Exclude<ConfigValue, null>, replacing: AST.TOMLValue | undefined): string {
  if (typeof value === "boolean") return String(value);
  if (typeof value === "number") {
    const s = String(value);
    return replacing?.kind === "float" && /^-?\d+$/.test(s) ? `${s}.0` : s;
  }
  if (replacing?.kind === "string" && replacing.style === "literal" && !/['\x00-\x08\x0a-\x1f\x7f]/.test(value)) return `'${value}'`;
  return basicString(value);
}

function basicString(value: string): string {
  const escapes: Record<string, string> = { '"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r" };
  return `"${value.replace(/["\\\x00-\x1f\x7f]/g, (c) => escapes[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)}"`;
}

function tomlKey(name: string): string {
  return /^[A-Za-z0-9_-]+$/.test(name) ? name : basicString(name);
}

function keyName(key: AST.TOMLBare | AST.TOMLQuoted): string {
  return key.type === "TOMLBare" ? key.name : key.value;
}

function pathId(path: Path): string {
  return JSON.stringify(path.map(String));
}

function pairAfter(text: string, container: Container, pair: AST.TOMLKeyValue, line: string): Splice {
  if (container.kind === "inline") return { start: pair.range[1], end: pair.range[1], insert: `, ${line}` };
  const at = lineEndOf(text, pair.range[1]);
  return { start: at, end: at, insert: `${eolOf(text)}${indentOf(text, pair.range[0])}${line}` };
}

function firstPair(text: string, container: Container, line: string): Splice {
  const eol = eolOf(text);
  const { node } = container;
  if (node.type === "TOMLInlineTable") {
    const open = node.range[0] + 1;
    return { start: open, end: node.range[1] - 1, insert: ` ${line} ` };
  }
  if (node.type === "TOMLTable") {
    const at = lineEndOf(text, node.key.range[1]);
    return { start: at, end: at, insert: `${eol}${line}` };
  }
  const firstTable = node.body.find((n) => n.type === "TOMLTable");
  if (firstTable === undefined) {
    const lead = text === "" || text.endsWith("\n") ? "" : eol;
    return { start: text.length, end: text.length, insert: `${lead}${line}${eol}` };
  }
  // Comment lines right above the first header belong to it; the new key goes above them.
  let at = lineStartOf(text, firstTable.range[0]);
  while (at > 0) {
    const above = lineStartOf(text, at - 1);
    if (!/^[ \t]*#/.test(text.slice(above, at))) break;
    at = above;
  }
  return { start: at, end: at, insert: `${line}${eol}${eol}` };
}

function newTable(text: string, parent: readonly string[], line: string): Splice {
  const eol = eolOf(text);
  const lead = text === "" ? "" : text.endsWith("\n") ? eol : eol + eol;
  return { start: text.length, end: text.length, insert: `${lead}[${parent.map(tomlKey).join(".")}]${eol}${line}${eol}` };
}
