/**
 * Reading config files: format by extension, strict parsing with positions, and the document
 * whose hash later guards the write.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { formatBytes } from "../bytes.ts";
import { extname } from "node:path";
import { BrimError, InputError } from "../errors/index.ts";
import { ioError } from "../files.ts";
import { parseJson, type ParsedJson } from "./json.ts";
import { getAt, parseKeyPath } from "./keys.ts";
import { parseToml, type ParsedToml } from "./toml.ts";
import type { ConfigDocument, ConfigFormat } from "./types.ts";
import { parseYaml, type ParsedYaml } from "./yaml.ts";

const EXTENSIONS: Record<string, ConfigFormat> = { ".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml" };

/**
 * A parse in the terms of its format: what the editor needs to find spans.
 *
 * @example
 * ```ts
 * const parsed = parseFormat("a: 1\n", "yaml", "c.yaml");
 * parsed.format === "yaml" && parsed.yaml.doc; // the yaml Document
 * ```
 */
export type ParsedFormat =
  | { format: "yaml"; data: unknown; empty: boolean; yaml: ParsedYaml }
  | { format: "json"; data: unknown; empty: boolean; json: ParsedJson }
  | { format: "toml"; data: unknown; empty: boolean; toml: ParsedToml };

/**
 * The format of a config file by its extension (`.yaml`, `.yml`, `.json`, `.toml`, any case).
 *
 * @example
 * ```ts
 * formatOf("conf/train.yml"); // "yaml"
 * formatOf("train.ini");      // throws InputError "train.ini: brim edits .yaml, .yml, .json and .toml config files, not .ini"
 * ```
 */
export function formatOf(path: string): ConfigFormat {
  const ext = extname(path).toLowerCase();
  const format = EXTENSIONS[ext];
  if (format === undefined)
    throw new InputError(`brim edits .yaml, .yml, .json and .toml config files, not ${ext === "" ? "a file without an extension" : ext}`, { file: path });
  return format;
}

/**
 * Parses config text. A UTF-8 byte order mark is allowed and kept; bad syntax throws E_PARSE
 * with `path:line:col`.
 *
 * @example
 * ```ts
 * const doc = parseConfig("[training]\nprecision = 'fp32'\n", "toml", "train.toml");
 * doc.get("training.precision"); // "fp32"
 * ```
 */
export function parseConfig(text: string, format: ConfigFormat, path: string): ConfigDocument {
  const parsed = parseFormat(text, format, path);
  const { data } = parsed;
  const sha256 = createHash("sha256").update(text, "utf8").digest("hex");
  const doc: ConfigDocument = {
    path,
    format,
    text,
    sha256,
    data,
    get: (key: string) => getAt(data, parseKeyPath(key)),
  };
  PARSES.set(doc, { text, format, parsed });
  return doc;
}

const PARSES = new WeakMap<ConfigDocument, { text: string; format: ConfigFormat; parsed: ParsedFormat }>();

/**
 * The format-level parse of a document, reused from {@link parseConfig} while the document's
 * text and format are the ones it parsed.
 *
 * @example
 * ```ts
 * const parsed = parsedFormatOf(parseConfig("a: 1\n", "yaml", "c.yaml"));
 * ```
 */
export function parsedFormatOf(doc: ConfigDocument): ParsedFormat {
  const cached = PARSES.get(doc);
  if (cached !== undefined && cached.text === doc.text && cached.format === doc.format) return cached.parsed;
  return parseFormat(doc.text, doc.format, doc.path);
}

/**
 * Reads and parses a config file (format by extension). The text must be UTF-8; `sha256` is the
 * hash of the file's bytes.
 *
 * @example
 * ```ts
 * const doc = await readConfig("examples/nbeats/config.yaml");
 * doc.get("training.trainer.accumulate_grad_batches"); // 1
 * ```
 */
export async function readConfig(path: string): Promise<ConfigDocument> {
  const format = formatOf(path);
  let bytes: Buffer;
  try {
    // Parsing keeps a node per value (about 45 bytes of memory per byte of YAML): the size is capped first.
    const { size } = await stat(path);
    if (size > MAX_CONFIG_BYTES)
      throw new BrimError("E_INPUT", `${path} is ${formatBytes(size)}: brim reads and edits config files up to ${formatBytes(MAX_CONFIG_BYTES)}`);
    bytes = await readFile(path);
    if (bytes.length > MAX_CONFIG_BYTES)
      throw new BrimError("E_INPUT", `${path} is ${formatBytes(bytes.length)}: brim reads and edits config files up to ${formatBytes(MAX_CONFIG_BYTES)}`);
  } catch (error) {
    if (error instanceof BrimError) throw error;
    throw ioError("read", path, error);
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch (error) {
    throw new BrimError("E_PARSE", `${path}: not UTF-8 text; brim only edits UTF-8 config files`, { cause: error });
  }
  return parseConfig(text, format, path);
}

/**
 * The largest config file brim reads (a training config is a few KiB; a 50 MiB YAML took 2.26 GB to parse).
 *
 * @example
 * ```ts
 * if (size > MAX_CONFIG_BYTES) console.log("too large for brim to edit");
 * ```
 */
export const MAX_CONFIG_BYTES = 4 * 2 ** 20;

/**
 * Parses text in its format's own terms (the byte order mark, if any, already removed).
 *
 * @example
 * ```ts
 * parseFormat('{"a": 1}', "json", "c.json").data; // { a: 1 }
 * ```
 */
export function parseFormat(text: string, format: ConfigFormat, path: string): ParsedFormat {
  const body = text.startsWith("\ufeff") ? text.slice(1) : text;
  if (format === "yaml") {
    const yaml = parseYaml(body, path);
    return { format, data: yaml.data, empty: yaml.empty, yaml };
  }
  if (format === "json") {
    const json = parseJson(body, path);
    return { format, data: json.data, empty: false, json };
  }
  const toml = parseToml(body, path);
  return { format, data: toml.data, empty: false, toml };
}
