/**
 * Key paths into config data (`data_loader.batch_size`, `stages.1.batch_size`, `"a.b".c`) and the
 * plain-data operations on them that every format shares: read, set, compare.
 *
 * @module
 */
import { BrimError, InputError } from "../errors/index.ts";

/**
 * One segment of a key path. `index` is set for an unquoted run of digits: it indexes a list,
 * and names the key `"<digits>"` in a mapping.
 *
 * @example
 * ```ts
 * parseKeyPath("stages.1.batch_size")[1]; // { name: "1", index: 1 }
 * ```
 */
export interface KeySegment {
  name: string;
  index: number | undefined;
}

/**
 * Splits a dotted key into segments. A segment in double quotes may hold dots (`"a.b".c`); inside
 * the quotes `\"` and `\\` stand for `"` and `\`.
 *
 * @example
 * ```ts
 * parseKeyPath('"lr.scale".value').map((s) => s.name); // ["lr.scale", "value"]
 * ```
 */
export function parseKeyPath(key: string): KeySegment[] {
  const segments: KeySegment[] = [];
  let i = 0;
  const bad = (why: string): never => {
    throw new InputError(`invalid key ${JSON.stringify(key)}: ${why}`);
  };
  if (key === "") bad("it is empty");
  for (;;) {
    if (key[i] === '"') {
      let name = "";
      i++;
      for (;;) {
        const c = key[i];
        if (c === undefined) bad("a quoted segment is not closed");
        if (c === '"') break;
        if (c === "\\") {
          const next = key[i + 1];
          if (next !== '"' && next !== "\\") bad(`only \\" and \\\\ may follow a backslash (column ${i + 1})`);
          name += next;
          i += 2;
          continue;
        }
        name += c;
        i++;
      }
      i++;
      segments.push({ name, index: undefined });
    } else {
      const end = key.indexOf(".", i);
      const name = end === -1 ? key.slice(i) : key.slice(i, end);
      if (name === "") bad(`an empty segment at column ${i + 1}`);
      if (name.includes('"')) bad(`a quote in the middle of segment ${JSON.stringify(name)}`);
      segments.push({ name, index: /^(0|[1-9]\d*)$/.test(name) && Number.isSafeInteger(Number(name)) ? Number(name) : undefined });
      i = end === -1 ? key.length : end;
    }
    if (i === key.length) return segments;
    if (key[i] !== ".") bad(`expected "." after a quoted segment (column ${i + 1})`);
    i++;
    if (i === key.length) bad("it ends with a dot");
  }
}

/**
 * Writes segments back as a key that {@link parseKeyPath} reads the same way.
 *
 * @example
 * ```ts
 * formatKeyPath([{ name: "a.b", index: undefined }, { name: "c", index: undefined }]); // '"a.b".c'
 * ```
 */
export function formatKeyPath(segments: readonly KeySegment[]): string {
  return segments
    .map((s) =>
      s.name !== "" && !/["\\.]/.test(s.name) && (s.index !== undefined || !/^\d+$/.test(s.name)) ? s.name : `"${s.name.replace(/["\\]/g, (c) => `\\${c}`)}"`,
    )
    .join(".");
}

/**
 * The value at `segments` in plain data, or `undefined` when any segment is absent.
 *
 * @example
 * ```ts
 * getAt({ stages: [{ bs: 4 }] }, parseKeyPath("stages.0.bs")); // 4
 * ```
 */
export function getAt(data: unknown, segments: readonly KeySegment[]): unknown {
  let node = data;
  for (const segment of segments) {
    if (Array.isArray(node)) {
      if (segment.index === undefined) return undefined;
      node = node[segment.index];
    } else if (isPlainObject(node)) {
      node = Object.hasOwn(node, segment.name) ? node[segment.name] : undefined;
    } else {
      return undefined;
    }
  }
  return node;
}

/**
 * Sets the value at `segments` in plain data (in place), creating missing mappings on the way.
 * The caller has checked with {@link checkEditPath} that the path can be set.
 *
 * @example
 * ```ts
 * const data = { a: {} };
 * setAt(data, parseKeyPath("a.b.c"), 1); // data is { a: { b: { c: 1 } } }
 * ```
 */
export function setAt(data: unknown, segments: readonly KeySegment[], value: unknown): void {
  let node = data;
  segments.forEach((segment, i) => {
    const last = i === segments.length - 1;
    if (Array.isArray(node) && segment.index !== undefined) {
      if (last) node[segment.index] = value;
      else node = node[segment.index];
    } else if (isPlainObject(node)) {
      if (last || !Object.hasOwn(node, segment.name))
        Object.defineProperty(node, segment.name, { value: last ? value : {}, writable: true, enumerable: true, configurable: true });
      node = node[segment.name];
    } else {
      throw new BrimError("E_INTERNAL", `setAt: cannot descend into ${typeof node} at ${segment.name}`);
    }
  });
}

/** The words a format uses for its containers, for error messages. */
export interface ContainerWords {
  mapping: string;
  list: string;
}

/**
 * Checks that `segments` can be set in `data`: every existing ancestor is a mapping (or a list
 * indexed by a number in range), and the present value, if any, is a single value rather than a
 * mapping or list. Throws an InputError that names the key otherwise.
 *
 * @example
 * ```ts
 * checkEditPath({ a: 1 }, parseKeyPath("a.b"), "a.b", "conf.yaml", { mapping: "mapping", list: "list" });
 * // throws InputError "conf.yaml: a.b: a holds 1, not a mapping"
 * ```
 */
export function checkEditPath(data: unknown, segments: readonly KeySegment[], key: string, file: string, words: ContainerWords): void {
  let node: unknown = data;
  for (const [i, segment] of segments.entries()) {
    const where = i === 0 ? "the document root" : formatKeyPath(segments.slice(0, i));
    if (Array.isArray(node)) {
      if (segment.index === undefined)
        throw new InputError(`${where} is a ${words.list}; index it with a number, not ${JSON.stringify(segment.name)}`, { file, field: key });
      if (segment.index >= node.length)
        throw new InputError(`index ${segment.index} is out of range: ${where} has ${node.length} item${node.length === 1 ? "" : "s"}`, { file, field: key });
      node = node[segment.index];
    } else if (isPlainObject(node)) {
      if (!Object.hasOwn(node, segment.name)) return;
      node = node[segment.name];
    } else {
      throw new InputError(`${where} holds ${describe(node)}, not a ${words.mapping}`, { file, field: key });
    }
  }
  if (Array.isArray(node)) throw new InputError(`holds a ${words.list}; brim only sets single values`, { file, field: key });
  if (isPlainObject(node)) throw new InputError(`holds a ${words.mapping}; brim only sets single values`, { file, field: key });
}

/**
 * Deep equality of plain data (objects, arrays, dates, scalars), treating NaN as equal to itself.
 *
 * @example
 * ```ts
 * sameValue({ a: [1, { b: null }] }, { a: [1, { b: null }] }); // true
 * sameValue(1, "1"); // false
 * ```
 */
export function sameValue(a: unknown, b: unknown): boolean {
  if (Object.is(a, b) || a === b) return true;
  if (a instanceof Date || b instanceof Date) return a instanceof Date && b instanceof Date && Object.is(a.getTime(), b.getTime());
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => sameValue(item, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && sameValue(a[k], b[k]));
  }
  return false;
}

/**
 * True for a mapping in parsed data (not an array, date or null).
 *
 * @example
 * ```ts
 * isPlainObject({}); // true
 * isPlainObject([]); // false
 * ```
 */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (typeof value === "string") return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (value instanceof Date) return `the date ${value.toISOString()}`;
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value);
  return "a value";
}
