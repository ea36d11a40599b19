/**
 * How each knob reaches the job: `{name}` templates in the command, explicit `--bind`s, and known
 * knob names found in the first config file the command names.
 *
 * @example
 * ```ts
 * const { bindings } = await resolveBindings(["python", "train.py", "--config", "config.yaml"], "/proj", []);
 * ```
 * @module
 */
import { readConfig, type ConfigDocument } from "../configs/index.ts";
import { UsageError } from "../errors/index.ts";
import { describeArgvKnob, findArgvKnobs } from "./argv.ts";
import { deepSpeedKnobs, isDeepSpeedConfig } from "./deepspeed.ts";
import { configFilesInCommand, detectKnobKeys, templateKnobs, type CodeKnob, type KnobBinding } from "./binding.ts";
import { dropLonePartners, namedSection } from "./keyed-section.ts";
import type { Knobs } from "./specs.ts";

/**
 * How each knob reaches the job: `{name}` templates in the command, explicit `--bind`s, and known knob
 * names found in a config file named in the command. Every knob also reaches the SDK through the
 * environment (`brim.knob`).
 *
 * @example
 * ```ts
 * const { bindings, documents, notes } = await resolveBindings(["python", "train.py", "--config", "config.yaml"], "/proj", []);
 * ```
 */
export async function resolveBindings(
  command: readonly string[],
  cwd: string,
  explicit: readonly KnobBinding[],
): Promise<{ bindings: KnobBinding[]; documents: Map<string, ConfigDocument>; notes: string[] }> {
  const bindings: KnobBinding[] = [];
  const notes: string[] = [];
  const documents = new Map<string, ConfigDocument>();
  const bound = (knob: string): boolean => bindings.some((binding) => binding.knob === knob);
  for (const knob of templateKnobs(command)) bindings.push({ knob, via: "template" });
  for (const binding of explicit) {
    if (bound(binding.knob)) throw new UsageError(`knob ${binding.knob} is bound twice (a {${binding.knob}} template and --bind)`);
    bindings.push(binding);
  }
  for (const binding of bindings) {
    if (binding.via === "config" && !documents.has(binding.file)) documents.set(binding.file, await readConfig(binding.file));
  }
  // a flag on the command line overrides the config file it names (argparse, HF, LightningCLI, Hydra)
  const argv = findArgvKnobs(command);
  for (const found of argv.found) if (!bound(found.knob)) bindings.push({ via: "argv", ...found });
  notes.push(...argv.notes);
  const configs = configFilesInCommand(command, cwd);
  const first = configs[0];
  const globals: KnobBinding[] = [];
  if (first !== undefined) {
    const document = documents.get(first.path) ?? (await readConfig(first.path));
    documents.set(first.path, document);
    // a file keyed by environment id (rl_zoo3's): the section the command names
    const detected = detectKnobKeys(namedSection(document.data, command));
    if (isDeepSpeedConfig(document.data)) {
      // DeepSpeed's batch keys are its own (the global one is not a micro-batch); the other knobs as in any config
      const deepspeed = deepSpeedKnobs(document.data);
      detected.found = [...deepspeed.found, ...detected.found.filter((f) => f.knob !== "batch_size" && f.knob !== "accumulation")];
      detected.notes = [...deepspeed.notes, ...detected.notes.filter((n) => !/^knob (batch_size|accumulation):/.test(n))];
      const both = ["batch_size", "accumulation"].every((knob) => !bound(knob) && detected.found.some((f) => f.knob === knob));
      if (deepspeed.globalBatch !== null && both)
        globals.push({
          knob: "batch_size",
          via: "config",
          file: first.path,
          key: deepspeed.globalBatch.key,
          globalBatch: { ranks: deepspeed.globalBatch.ranks },
        });
    }
    for (const found of detected.found) {
      if (bound(found.knob)) continue;
      bindings.push({ knob: found.knob, via: "config", file: first.path, key: found.key });
    }
    bindings.push(...globals);
    notes.push(...detected.notes);
    if (configs.length > 1) notes.push(`several config files in the command; knobs were looked for in ${first.arg} only (bind others with --bind)`);
  }
  const alone = dropLonePartners(bindings, explicit);
  return { bindings: alone.bindings, documents, notes: [...notes, ...alone.notes] };
}

/**
 * Where each knob was found, in one line for trial 0: `batch_size=32 (argv --batch-size 32), num_workers=0 (config.yaml: data.num_workers)`.
 *
 * @example
 * ```ts
 * describeBindings(bindings, documents, "/proj"); // "knobs found: batch_size=32 (command line: --batch-size 32)"
 * ```
 */
export function describeBindings(bindings: readonly KnobBinding[], documents: ReadonlyMap<string, ConfigDocument>, cwd: string): string {
  if (bindings.length === 0)
    return "knobs found: none on the command line or in a config file it names (trial 0 looks for knobs the job reads through brim.knob)";
  const where = bindings.map((binding) => {
    switch (binding.via) {
      case "argv":
        return `${binding.knob} (command line: ${describeArgvKnob(binding)})`;
      case "config": {
        const value = documents.get(binding.file)?.get(binding.key);
        const file = binding.file.startsWith(`${cwd}/`) ? binding.file.slice(cwd.length + 1) : binding.file;
        if (binding.globalBatch !== undefined)
          return `${binding.key}=${String(value)} kept = batch_size × accumulation × ${binding.globalBatch.ranks} ranks (${file}: ${binding.key})`;
        return `${binding.knob}=${String(value)} (${file}: ${binding.key})`;
      }
      case "template":
        return `${binding.knob} (the command's {${binding.knob}})`;
      case "code":
        return `${binding.knob}=${String(binding.value)} (code: ${codePlace(binding, cwd)}${binding.argument === true ? ", the DataLoader's argument" : ""})`;
      default:
        return `${binding.knob} (environment, brim.knob)`;
    }
  });
  return `knobs found: ${where.join(", ")}`;
}

/**
 * Where a code knob sits, as `file:line`, the file relative to `cwd` when inside it.
 *
 * @example
 * ```ts
 * codePlace({ knob: "batch_size", via: "code", file: "/proj/train.py", line: 48, name: "batch_size", value: 20 }, "/proj"); // "train.py:48"
 * ```
 */
export function codePlace(binding: Pick<CodeKnob, "file" | "line">, cwd: string): string {
  const file = binding.file.startsWith(`${cwd}/`) ? binding.file.slice(cwd.length + 1) : binding.file;
  return `${file}:${binding.line}`;
}

/**
 * The baseline's knobs that reach the job: bound to a flag, a config key, a template or the code, or
 * read by the job through `brim.knob`. A knob `--knob` gave values to that none of these reach is not
 * among them: when the job writes it as a literal in its code, that is where trials vary it.
 *
 * @example
 * ```ts
 * reachedKnobs({ batch_size: 16, num_workers: 2 }, [{ knob: "num_workers", via: "argv", ... }], new Set()); // { num_workers: 2 }
 * ```
 */
export function reachedKnobs(baseline: Knobs, bindings: readonly KnobBinding[], read: ReadonlySet<string> | ReadonlyMap<string, unknown>): Knobs {
  const reached = new Set([...bindings.map((binding) => binding.knob), ...read.keys()]);
  return Object.fromEntries(Object.entries(baseline).filter(([knob]) => reached.has(knob)));
}
