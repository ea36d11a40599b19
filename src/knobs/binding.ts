import { existsSync } from "node:fs";
import { extname, resolve } from "node:path";
import type { ConfigDocument } from "../configs/index.ts";
import { InputError, UsageError } from "../errors/index.ts";
import { KNOWN_KNOBS } from "./lists.ts";
import type { ArgvKnob } from "./argv.ts";
import type { KnobValue, Knobs } from "./specs.ts";

/** How a knob's value reaches the job. */
export type KnobBinding = { knob: string; via: "template" } | ConfigKnob | { knob: string; via: "env" } | ({ via: "argv" } & ArgvKnob) | CodeKnob;

/**
 * A knob at a key of a config file. `globalBatch` marks a key that holds the global batch (DeepSpeed's
 * `train_batch_size`): it is written as the micro-batch × the accumulation × `ranks`, never read as the knob.
 */
export interface ConfigKnob {
  knob: string;
  via: "config";
  file: string;
  key: string;
  globalBatch?: { ranks: number };
}

/**
 * The value a config binding writes for `knobs`: the knob's value, or for a global-batch key the
 * micro-batch × accumulation × ranks. Undefined when the knob has no value.
 *
 * @example
 * ```ts
 * configValue({ knob: "batch_size", via: "config", file: "/p/ds.json", key: "train_batch_size", globalBatch: { ranks: 2 } }, { batch_size: 16, accumulation: 2 }); // 64
 * ```
 */
export function configValue(binding: ConfigKnob, knobs: Knobs): KnobValue | undefined {
  const value = knobs[binding.knob];
  if (binding.globalBatch === undefined || value === undefined) return value;
  const accumulation = knobs.accumulation;
  return Number(value) * (typeof accumulation === "number" ? accumulation : 1) * binding.globalBatch.ranks;
}

/**
 * The edits the config bindings make for `knobs`, by file.
 *
 * @example
 * ```ts
 * configEditsByFile(bindings, { batch_size: 64 }); // Map { "/p/config.yaml" => [{ key: "data.batch_size", value: 64 }] }
 * ```
 */
export function configEditsByFile(bindings: readonly KnobBinding[], knobs: Knobs): Map<string, { key: string; value: KnobValue }[]> {
  const byFile = new Map<string, { key: string; value: KnobValue }[]>();
  for (const binding of bindings) {
    if (binding.via !== "config") continue;
    const value = configValue(binding, knobs);
    if (value !== undefined) byFile.set(binding.file, [...(byFile.get(binding.file) ?? []), { key: binding.key, value }]);
  }
  return byFile;
}

/**
 * A knob decided in the job's code. Either an integer literal (`batch_size=20` on one line): trials
 * vary it in memory (brim._code); or, with `argument`, an argument of the DataLoader built on that
 * line (`persistent_workers`, `prefetch_factor`, `pin_memory`, `num_workers`, whatever the line
 * writes): the attach passes the trial's value to that DataLoader (BRIM_LOADER_ARGS). Either way apply
 * says the line to change.
 */
export interface CodeKnob {
  knob: string;
  via: "code";
  /** the file (absolute) and the 1-based line that holds `name = value`, or that builds the DataLoader */
  file: string;
  line: number;
  /** the name before the `=` on that line, or the DataLoader's argument */
  name: string;
  /** the value the job ran with: trial 0's */
  value: KnobValue;
  /** set as the DataLoader's argument by the attach, not by editing a literal */
  argument?: true;
}

/**
 * The environment that gives a run the knob values written in the code, where they differ from the
 * code's: literals edited in memory (BRIM_CODE_KNOBS, python/brim/_code.py) and DataLoader arguments
 * the attach sets (BRIM_LOADER_ARGS). Empty when every code knob keeps its value.
 *
 * @example
 * ```ts
 * codeKnobEnv([{ knob: "batch_size", via: "code", file: "/p/main.py", line: 33, name: "batch_size", value: 32 }], { batch_size: 16 });
 * // { BRIM_CODE_KNOBS: '[{"file":"/p/main.py","line":33,"name":"batch_size","value":16}]' }
 * ```
 */
export function codeKnobEnv(bindings: readonly KnobBinding[], knobs: Knobs): Record<string, string> {
  const changed = bindings.flatMap((binding) =>
    binding.via === "code" && knobs[binding.knob] !== undefined && knobs[binding.knob] !== binding.value
      ? [{ file: binding.file, line: binding.line, name: binding.name, value: knobs[binding.knob], argument: binding.argument === true }]
      : [],
  );
  const codeEdits = changed.filter((edit) => !edit.argument).map(({ argument: _, ...edit }) => edit);
  const loaderArgs = changed.filter((edit) => edit.argument).map(({ argument: _, ...edit }) => edit);
  return {
    ...(codeEdits.length > 0 ? { BRIM_CODE_KNOBS: JSON.stringify(codeEdits) } : {}),
    ...(loaderArgs.length > 0 ? { BRIM_LOADER_ARGS: JSON.stringify(loaderArgs) } : {}),
  };
}

const CONFIG_EXTENSIONS = new Set([".yaml", ".yml", ".json", ".toml"]);
const TEMPLATE = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * Knob names used as `{name}` templates in the command.
 *
 * @example
 * ```ts
 * templateKnobs(["python", "train.py", "--bs", "{batch_size}"]); // ["batch_size"]
 * ```
 */
export function templateKnobs(command: readonly string[]): string[] {
  const names = new Set<string>();
  for (const arg of command) for (const match of arg.matchAll(TEMPLATE)) names.add(match[1] as string);
  return [...names];
}

/**
 * The command with `{name}` templates filled from `knobs`; a template without a value is an error.
 *
 * @example
 * ```ts
 * fillTemplate(["python", "train.py", "--bs", "{batch_size}"], { batch_size: 64 }); // [..., "--bs", "64"]
 * ```
 */
export function fillTemplate(command: readonly string[], knobs: Knobs): string[] {
  return command.map((arg) =>
    arg.replace(TEMPLATE, (_whole, name: string) => {
      const value = knobs[name];
      if (value === undefined)
        throw new UsageError(`the command uses {${name}} but no value for knob '${name}' is known: give one with --knob ${name}=<value>`);
      return String(value);
    }),
  );
}

/**
 * Config files named in the command: arguments (or the values of `--flag=value` and `key=value`,
 * e.g. `config_path=conf/x.yaml`) that are existing .yaml/.yml/.json/.toml files, resolved against `cwd`.
 *
 * @example
 * ```ts
 * configFilesInCommand(["python", "train.py", "--config", "conf/config.yaml"], "/proj"); // [{ index: 3, path: "/proj/conf/config.yaml", arg: "conf/config.yaml" }]
 * ```
 */
export function configFilesInCommand(command: readonly string[], cwd: string): { index: number; path: string; arg: string }[] {
  const found: { index: number; path: string; arg: string }[] = [];
  command.forEach((arg, index) => {
    if (index === 0) return;
    // `--config=x.yaml`, and `config_path=x.yaml` / `cfg=x.yaml` overrides name a config too
    const value = /^(--?)?[A-Za-z_][\w.-]*=/.test(arg) ? arg.slice(arg.indexOf("=") + 1) : arg;
    if (!CONFIG_EXTENSIONS.has(extname(value).toLowerCase())) return;
    const path = resolve(cwd, value);
    if (existsSync(path)) found.push({ index, path, arg: value });
  });
  return found;
}

/** Every key path in a parsed config, with its value (lists by index). */
function leafKeys(value: unknown, prefix: string[] = []): { path: string[]; value: unknown }[] {
  if (Array.isArray(value)) return value.flatMap((item, index) => leafKeys(item, [...prefix, String(index)]));
  if (typeof value === "object" && value !== null) {
    return Object.entries(value as Record<string, unknown>).flatMap(([key, item]) => leafKeys(item, [...prefix, key]));
  }
  return [{ path: prefix, value }];
}

/** A knob found in a config file by its usual key name. */
export interface DetectedKey {
  knob: string;
  key: string;
  value: unknown;
}

/**
 * Finds the known knobs in a parsed config by key name, taking the shallowest match (a default
 * section wins over per-stage overrides); two matches at the same depth are ambiguous and left out
 * with a note.
 *
 * @example
 * ```ts
 * detectKnobKeys({ data_loader: { batch_size: 32, num_workers: 0 } }).found;
 * // [{ knob: "batch_size", key: "data_loader.batch_size", value: 32 }, { knob: "num_workers", ... }]
 * ```
 */
export function detectKnobKeys(config: unknown): { found: DetectedKey[]; notes: string[] } {
  const leaves = leafKeys(config);
  const found: DetectedKey[] = [];
  const notes: string[] = [];
  for (const [knob, names] of Object.entries(KNOWN_KNOBS)) {
    const matches = leaves.filter((leaf) => names.includes(leaf.path[leaf.path.length - 1] ?? "") && !leaf.path.some((part) => part.includes(".")));
    if (matches.length === 0) continue;
    const depth = Math.min(...matches.map((match) => match.path.length));
    const shallowest = matches.filter((match) => match.path.length === depth);
    if (shallowest.length > 1) {
      notes.push(`knob ${knob}: several keys could hold it (${shallowest.map((m) => m.path.join(".")).join(", ")}); bind one with --bind ${knob}=<file>:<key>`);
      continue;
    }
    const chosen = shallowest[0] as { path: string[]; value: unknown };
    found.push({ knob, key: chosen.path.join("."), value: chosen.value });
    if (matches.length > 1)
      notes.push(
        `knob ${knob}: using ${chosen.path.join(".")}; deeper keys (${matches
          .filter((m) => m !== chosen)
          .map((m) => m.path.join("."))
          .join(", ")}) override it in places and are left as they are`,
      );
  }
  return { found, notes };
}

/**
 * Parses `--bind knob=<file>:<key>` or `--bind knob=env`.
 *
 * @example
 * ```ts
 * parseBinding("batch_size=conf/config.yaml:data_loader.batch_size", "/proj");
 * // { knob: "batch_size", via: "config", file: "/proj/conf/config.yaml", key: "data_loader.batch_size" }
 * ```
 */
export function parseBinding(text: string, cwd: string): KnobBinding {
  const equals = text.indexOf("=");
  if (equals <= 0) throw new UsageError(`--bind expects knob=<file>:<key> or knob=env, got '${text}'`);
  const knob = text.slice(0, equals);
  const target = text.slice(equals + 1);
  if (target === "env") return { knob, via: "env" };
  const colon = target.lastIndexOf(":");
  if (colon <= 0 || colon === target.length - 1)
    throw new UsageError(`--bind ${knob}: expected <file>:<key> (e.g. conf/config.yaml:data_loader.batch_size), got '${target}'`);
  const file = resolve(cwd, target.slice(0, colon));
  if (!existsSync(file)) throw new InputError(`no such file`, { file: target.slice(0, colon), field: `--bind ${knob}` });
  return { knob, via: "config", file, key: target.slice(colon + 1) };
}

/**
 * A value read from a config as a knob value; null and missing values are `undefined`.
 *
 * @example
 * ```ts
 * asKnobValue(32); // 32
 * asKnobValue(null); // undefined
 * ```
 */
export function asKnobValue(value: unknown): KnobValue | undefined {
  if (typeof value === "number" || typeof value === "string" || typeof value === "boolean") return value;
  return undefined;
}

/**
 * The values of the knobs bound to config keys and command-line flags, as they are now (trial 0's values).
 *
 * @example
 * ```ts
 * configBaseline(bindings, documents); // { batch_size: 32, num_workers: 0 }
 * ```
 */
export function configBaseline(bindings: readonly KnobBinding[], documents: ReadonlyMap<string, ConfigDocument>): Knobs {
  const knobs: Knobs = {};
  for (const binding of bindings) {
    if (binding.via === "argv") knobs[binding.knob] = binding.value;
    if (binding.via !== "config" || binding.globalBatch !== undefined) continue;
    const value = asKnobValue(documents.get(binding.file)?.get(binding.key));
    if (value !== undefined) knobs[binding.knob] = value;
  }
  return knobs;
}
