/**
 * Knobs the user keeps on the command line: argparse flags (`--batch-size 32`, `--batch_size=32`,
 * `-b 32`), Hugging Face `TrainingArguments` flags (`--per_device_train_batch_size 16`, `--bf16`),
 * LightningCLI dotted flags (`--data.batch_size 32`, `--trainer.precision 16-mixed`) and
 * Hydra/OmegaConf overrides (`data.batch_size=32`). Found by the names, switches and spellings
 * the knob table gives (src/knobs/specs.ts), and varied by rewriting the command for each trial. Pure: no I/O.
 *
 * @example
 * ```ts
 * const found = findArgvKnobs(["python", "train.py", "--batch-size", "32", "--workers=0"]).found;
 * rewriteArgv(["python", "train.py", "--batch-size", "32"], found, { batch_size: 128 }); // [..., "--batch-size", "128"]
 * ```
 * @module
 */
import { BOOLEAN_KNOBS, INTEGER_KNOBS, knobOfName, knobOfShortFlag, knobSpec, switchOf } from "./lists.ts";
import type { KnobValue, Knobs } from "./specs.ts";

/** How a knob's value sits in the command. */
export type ArgvForm = "separate" | "equals" | "override" | "switch";

/** A knob found on the command line. */
export interface ArgvKnob {
  knob: string;
  /** index in the command of the flag (separate, equals, switch) or of the override */
  index: number;
  form: ArgvForm;
  /** the flag (`--batch-size`) or the override's key (`data.batch_size`), as written */
  flag: string;
  /** the value the command gives (trial 0's) */
  value: KnobValue;
}

function spellingOf(knob: string, written: string): Readonly<Record<string, string>> | undefined {
  return knobSpec(knob)?.spellings?.find((spelling) => Object.values(spelling).includes(written.toLowerCase()));
}

/** A name as the table lists it: the last dotted segment, `-` as `_`, lower case. */
const normalised = (name: string): string => (name.split(".").pop() ?? "").toLowerCase().replace(/-/g, "_");

/** A value the flag can hold as its knob: a `--dtype` is precision only when it names one (not `int8`). */
function argvKnobValue(knob: string, flag: string, text: string): KnobValue | null {
  if (knobSpec(knob)?.spelledOnly?.includes(normalised(flag.replace(/^-+/, ""))) === true && spellingOf(knob, text) === undefined) return null;
  return argvValue(knob, text);
}

/** The knob a flag's name stands for: the last dotted segment, without dashes, `-` as `_`. */
function knobOfFlag(flag: string): string | null {
  if (/^-[A-Za-z]$/.test(flag)) return knobOfShortFlag(flag.slice(1));
  if (!flag.startsWith("--")) return null;
  return knobOfName(normalised(flag.slice(2)));
}

/**
 * A command-line value as the knob reads it: integers for counts, booleans for switches.
 *
 * @example
 * ```ts
 * argvValue("batch_size", "32"); // 32
 * argvValue("pin_memory", "True"); // true
 * argvValue("batch_size", "auto"); // null
 * ```
 */
export function argvValue(knob: string, text: string): KnobValue | null {
  if (INTEGER_KNOBS.has(knob)) return /^\d+$/.test(text) ? Number(text) : null;
  if (BOOLEAN_KNOBS.has(knob)) {
    const lower = text.toLowerCase();
    return lower === "true" || lower === "1" ? true : lower === "false" || lower === "0" ? false : null;
  }
  const spelling = spellingOf(knob, text);
  if (spelling !== undefined) return Object.keys(spelling).find((name) => spelling[name] === text.toLowerCase()) ?? null;
  if (text === "" || text.startsWith("-")) return /^-?\d/.test(text) ? text : null;
  return /^\d+$/.test(text) ? Number(text) : text;
}

const isFlag = (arg: string | undefined): boolean => arg !== undefined && /^--?[A-Za-z]/.test(arg);

/**
 * The known knobs on a command line, in order; a knob given twice keeps its first place (noted).
 * An argument that is a `{name}` template is not a value.
 *
 * @example
 * ```ts
 * findArgvKnobs(["python", "train.py", "--per_device_train_batch_size", "16", "--bf16", "data.num_workers=4"]).found.map((k) => k.knob);
 * // ["batch_size", "precision", "num_workers"]
 * ```
 */
export function findArgvKnobs(command: readonly string[]): { found: ArgvKnob[]; notes: string[] } {
  const found: ArgvKnob[] = [];
  const notes: string[] = [];
  const add = (entry: ArgvKnob): void => {
    const earlier = found.find((other) => other.knob === entry.knob);
    if (earlier === undefined) found.push(entry);
    else notes.push(`knob ${entry.knob}: the command gives it twice (${earlier.flag} and ${entry.flag}); trials vary ${earlier.flag}`);
  };
  for (let index = 1; index < command.length; index++) {
    const arg = command[index] as string;
    if (arg.includes("{")) continue;
    if (arg === "--") continue;
    if (isFlag(arg)) {
      const equals = arg.indexOf("=");
      const flag = equals > 0 ? arg.slice(0, equals) : arg;
      const switched = switchOf(flag.replace(/^--?/, "").toLowerCase());
      if (equals < 0 && switched !== undefined && flag.startsWith("--") && !/^(true|false)$/i.test(command[index + 1] ?? "")) {
        add({ knob: switched.knob, index, form: "switch", flag, value: switched.value });
        continue;
      }
      const knob = knobOfFlag(flag);
      if (knob === null) continue;
      if (equals > 0) {
        const value = argvKnobValue(knob, flag, arg.slice(equals + 1));
        if (value !== null) add({ knob, index, form: "equals", flag, value });
        continue;
      }
      const next = command[index + 1];
      if (BOOLEAN_KNOBS.has(knob) && (next === undefined || isFlag(next))) {
        add({ knob, index, form: "switch", flag, value: true });
        continue;
      }
      if (next === undefined || next.includes("{")) continue;
      const value = argvKnobValue(knob, flag, next);
      if (value !== null) add({ knob, index, form: "separate", flag, value });
      index++;
      continue;
    }
    // Hydra / OmegaConf overrides: key.path=value, also +key / ++key
    const override = /^(\+{0,2})([A-Za-z_][\w-]*(?:\.[\w-]+)*)=(.*)$/.exec(arg);
    if (override !== null) {
      const key = override[2] as string;
      const knob = knobOfName(normalised(key));
      const value = knob === null ? null : argvKnobValue(knob, key, override[3] as string);
      if (knob !== null && value !== null) add({ knob, index, form: "override", flag: `${override[1] ?? ""}${key}`, value });
    }
  }
  return { found, notes };
}

function formatValue(knob: string, value: KnobValue, written: string | undefined): string {
  const spelling = typeof value === "string" && written !== undefined ? spellingOf(knob, written) : undefined;
  if (spelling !== undefined && typeof value === "string" && spelling[value] !== undefined) return spelling[value];
  if (typeof value !== "boolean") return String(value);
  if (written !== undefined && /^(True|False)$/.test(written)) return value ? "True" : "False";
  if (written !== undefined && /^[01]$/.test(written)) return value ? "1" : "0";
  return String(value);
}

/** The switch that gives `knob` its `value` (`--bf16`), null for none; a boolean's own flag when true. */
function switchFor(knob: string, value: KnobValue, flag: string): string | null {
  const switches = knobSpec(knob)?.switches;
  if (switches === undefined) return value === true ? flag : null;
  const dashes = flag.startsWith("--") ? "--" : "-";
  for (const [name, set] of Object.entries(switches)) if (set === value) return `${dashes}${name}`;
  return null;
}

/**
 * The command with the argv knobs set to `knobs` (knobs without a value keep theirs). A switch is
 * present or absent: `--bf16` for bf16-mixed, `--fp16` for fp16-mixed, nothing for fp32;
 * `--pin-memory` for true, nothing for false. Indexes are the original command's.
 *
 * @example
 * ```ts
 * rewriteArgv(["t.py", "--bf16", "--bs=8"], findArgvKnobs(["t.py", "--bf16", "--bs=8"]).found, { precision: "fp32", batch_size: 32 });
 * // ["t.py", "--bs=32"]
 * ```
 */
export function rewriteArgv(command: readonly string[], knobs: readonly ArgvKnob[], values: Knobs): string[] {
  const out: string[] = [];
  for (let index = 0; index < command.length; index++) {
    const arg = command[index] as string;
    const entry = knobs.find((knob) => knob.index === index);
    const value = entry === undefined ? undefined : values[entry.knob];
    if (entry === undefined || value === undefined) {
      out.push(arg);
      continue;
    }
    switch (entry.form) {
      case "separate":
        out.push(arg, formatValue(entry.knob, value, command[index + 1]));
        index++;
        break;
      case "equals":
        out.push(`${entry.flag}=${formatValue(entry.knob, value, arg.slice(arg.indexOf("=") + 1))}`);
        break;
      case "override":
        out.push(`${entry.flag}=${formatValue(entry.knob, value, arg.slice(arg.indexOf("=") + 1))}`);
        break;
      case "switch": {
        const flag = switchFor(entry.knob, value, entry.flag);
        if (flag !== null) out.push(flag);
        break;
      }
    }
  }
  return out;
}

/**
 * Where an argv knob was found, for people: `--batch-size 32`, `data.batch_size=32`, `--bf16`.
 *
 * @example
 * ```ts
 * describeArgvKnob({ knob: "batch_size", index: 2, form: "separate", flag: "--batch-size", value: 32 }); // "--batch-size 32"
 * ```
 */
export function describeArgvKnob(entry: Pick<ArgvKnob, "form" | "flag" | "value">): string {
  if (entry.form === "switch") return entry.flag;
  return entry.form === "separate" ? `${entry.flag} ${String(entry.value)}` : `${entry.flag}=${String(entry.value)}`;
}
