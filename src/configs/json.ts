/**
 * JSON edits as minimal spans. A small scanner (strict RFC 8259, as Python's `json` reads it)
 * records where every value starts and ends; an edit replaces one value's span, or inserts one
 * member with the indentation and `": "` spacing the file already uses.
 *
 * @module
 */
import { BrimError } from "../errors/index.ts";
import { formatKeyPath, type ContainerWords, type KeySegment } from "./keys.ts";
import { eolOf, indentOf, lineStartOf, parseFailure, type Splice } from "./spans.ts";
import type { ConfigValue } from "./types.ts";

/**
 * A JSON value with its span in the text (`end` is exclusive).
 *
 * @example
 * ```ts
 * const node = parseJson('{"a": 1}', "c.json").root;
 * node.kind === "object" && node.members[0]?.value.start; // 6
 * ```
 */
export type JsonNode =
  | { kind: "object"; start: number; end: number; members: JsonMember[] }
  | { kind: "array"; start: number; end: number; items: JsonNode[] }
  | { kind: "scalar"; start: number; end: number };

/**
 * One `"key": value` of an object, with the span of the key (quotes included).
 *
 * @example
 * ```ts
 * const member: JsonMember = { key: "a", keyStart: 1, keyEnd: 4, value: { kind: "scalar", start: 6, end: 7 } };
 * ```
 */
export interface JsonMember {
  key: string;
  keyStart: number;
  keyEnd: number;
  value: JsonNode;
}

/**
 * A parsed JSON config: the tree of spans and the plain data.
 *
 * @example
 * ```ts
 * parseJson('{"a": [1, 2]}', "c.json").data; // { a: [1, 2] }
 * ```
 */
export interface ParsedJson {
  root: JsonNode;
  data: unknown;
}

/** JSON's names for its containers. */
export const JSON_WORDS: ContainerWords = { mapping: "object", list: "array" };

/**
 * Parses strict JSON, throwing E_PARSE with `path:line:col` at the first bad character.
 *
 * @example
 * ```ts
 * parseJson('{"a": 1,}', "c.json"); // throws BrimError E_PARSE "c.json:1:9: not valid JSON: expected a string key …"
 * ```
 */
export function parseJson(text: string, file: string): ParsedJson {
  const scanner = new Scanner(text, file);
  scanner.space();
  const root = scanner.value(0);
  scanner.space();
  if (scanner.at < text.length) scanner.fail("unexpected text after the end of the JSON value");
  return { root, data: JSON.parse(text) as unknown };
}

/**
 * The splice that sets `segments` to `value`: the value's span when the key exists, else a new
 * member at the end of its object (creating missing objects on the way). The caller has checked
 * the path against the data.
 *
 * @example
 * ```ts
 * const text = '{\n  "a": 1\n}\n';
 * applySplice(text, jsonSplice(parseJson(text, "c.json"), text, parseKeyPath("b"), true)); // '{\n  "a": 1,\n  "b": true\n}\n'
 * ```
 */
export function jsonSplice(parsed: ParsedJson, text: string, segments: readonly KeySegment[], value: ConfigValue): Splice {
  let node = parsed.root;
  for (const [i, segment] of segments.entries()) {
    let child: JsonNode | undefined;
    if (node.kind === "object") {
      child = node.members.findLast((m) => m.key === segment.name)?.value;
      if (child === undefined) return insertMember(text, node, segments.slice(i), value);
    } else if (node.kind === "array" && segment.index !== undefined) {
      child = node.items[segment.index];
    }
    if (child === undefined) throw new BrimError("E_INTERNAL", `jsonSplice: ${formatKeyPath(segments.slice(0, i + 1))} is not in the document`);
    node = child;
  }
  return { start: node.start, end: node.end, insert: renderJson(value) };
}

/**
 * The JSON text of one scalar.
 *
 * @example
 * ```ts
 * renderJson("fp16-mixed"); // '"fp16-mixed"'
 * ```
 */
export function renderJson(value: ConfigValue): string {
  return JSON.stringify(value);
}

function insertMember(text: string, object: Extract<JsonNode, { kind: "object" }>, rest: readonly KeySegment[], value: ConfigValue): Splice {
  const eol = eolOf(text);
  const unit = indentUnit(text);
  const first = object.members[0];
  const last = object.members.at(-1);
  const colon = first === undefined ? ": " : text.slice(first.keyEnd, first.value.start);
  const multiline = first === undefined ? unit !== null : text.slice(object.start, first.keyStart).includes("\n");
  const outer = indentOf(text, object.start);
  const inner =
    first !== undefined && multiline && /^[ \t]*$/.test(text.slice(lineStartOf(text, first.keyStart), first.keyStart))
      ? indentOf(text, first.keyStart)
      : outer + (unit ?? "  ");
  const step = unit ?? "  ";
  const member = (depth: number, i: number): string => {
    const key = `${JSON.stringify(rest[i]?.name ?? "")}${colon}`;
    if (i === rest.length - 1) return key + renderJson(value);
    if (!multiline) return `${key}{${member(depth + 1, i + 1)}}`;
    const pad = inner + step.repeat(depth);
    return `${key}{${eol}${pad}${step}${member(depth + 1, i + 1)}${eol}${pad}}`;
  };
  if (last === undefined) {
    const insert = multiline ? `${eol}${inner}${member(0, 0)}${eol}${outer}` : member(0, 0);
    return { start: object.start + 1, end: object.end - 1, insert };
  }
  const at = last.value.end;
  const second = object.members[1];
  const comma = second !== undefined && first !== undefined ? text.slice(first.value.end, second.keyStart) : colon.endsWith(" ") ? ", " : ",";
  return { start: at, end: at, insert: multiline ? `,${eol}${inner}${member(0, 0)}` : `${comma}${member(0, 0)}` };
}

function indentUnit(text: string): string | null {
  return /\n([ \t]+)\S/.exec(text)?.[1] ?? null;
}

class Scanner {
  at = 0;
  readonly text: string;
  readonly file: string;

  constructor(text: string, file: string) {
    this.text = text;
    this.file = file;
  }

  fail(reason: string, at = this.at): never {
    throw parseFailure(this.file, this.text, at, "JSON", reason);
  }

  space(): void {
    while (this.at < this.text.length && " \t\r\n".includes(this.text[this.at] ?? "")) this.at++;
  }

  value(depth: number): JsonNode {
    if (depth > 1000) this.fail("nested more than 1000 levels deep");
    const c = this.text[this.at];
    const start = this.at;
    if (c === "{") return this.object(depth);
    if (c === "[") return this.array(depth);
    if (c === '"') {
      this.string();
      return { kind: "scalar", start, end: this.at };
    }
    for (const word of ["true", "false", "null"]) {
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return { kind: "scalar", start, end: this.at };
      }
    }
    const number = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?/y;
    number.lastIndex = this.at;
    if (number.exec(this.text) !== null && number.lastIndex > start) {
      this.at = number.lastIndex;
      return { kind: "scalar", start, end: this.at };
    }
    return this.fail(c === undefined ? "unexpected end of the file" : `unexpected ${JSON.stringify(c)}`);
  }

  string(): string {
    const start = this.at;
    this.at++;
    for (;;) {
      const c = this.text[this.at];
      if (c === undefined) this.fail("a string is not closed", start);
      if (c === '"') break;
      if (c < " ") this.fail("a control character inside a string must be escaped");
      if (c === "\\") {
        const e = this.text[this.at + 1] ?? "";
        if (e === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(this.text.slice(this.at + 2, this.at + 6))) this.fail("\\u must be followed by 4 hex digits");
          this.at += 6;
          continue;
        }
        if (!'"\\/bfnrt'.includes(e) || e === "") this.fail(`invalid escape \\${e}`);
        this.at += 2;
        continue;
      }
      this.at++;
    }
    this.at++;
    return JSON.parse(this.text.slice(start, this.at)) as string;
  }

  object(depth: number): JsonNode {
    const start = this.at;
    const members: JsonMember[] = [];
    this.at++;
    this.space();
    if (this.text[this.at] === "}") {
      this.at++;
      return { kind: "object", start, end: this.at, members };
    }
    for (;;) {
      if (this.text[this.at] !== '"') this.fail(members.length === 0 ? 'expected a string key or "}"' : "expected a string key (no trailing comma)");
      const keyStart = this.at;
      const key = this.string();
      const keyEnd = this.at;
      this.space();
      if (this.text[this.at] !== ":") this.fail('expected ":" after the key');
      this.at++;
      this.space();
      members.push({ key, keyStart, keyEnd, value: this.value(depth + 1) });
      this.space();
      const c = this.text[this.at];
      this.at++;
      if (c === "}") return { kind: "object", start, end: this.at, members };
      if (c !== ",") this.fail('expected "," or "}"', this.at - 1);
      this.space();
    }
  }

  array(depth: number): JsonNode {
    const start = this.at;
    const items: JsonNode[] = [];
    this.at++;
    this.space();
    if (this.text[this.at] === "]") {
      this.at++;
      return { kind: "array", start, end: this.at, items };
    }
    for (;;) {
      items.push(this.value(depth + 1));
      this.space();
      const c = this.text[this.at];
      this.at++;
      if (c === "]") return { kind: "array", start, end: this.at, items };
      if (c !== ",") this.fail('expected "," or "]"', this.at - 1);
      this.space();
    }
  }
}
