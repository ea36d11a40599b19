/**
 * Knobs the user keeps on the command line: argparse flags (`--batch-size 32`, `--batch_size=32`,
 * `-b 32`), Hugging Face `TrainingArguments` flags (`--per_device_train_batch_size 16`, `--bf16`),
 * LightningCLI dotted flags (`--data.batch_size 32`, `--trainer.precision 16-mixed`) and
 * Hydra/OmegaConf overrides (`data.batch_size=32`). Found by the same key names as config keys
 * (knobs.ts), and varied by rewriting the command for each trial. Pure: no I/O.
 *
 * @example
 * ```ts
 * const found = findArgvKnobs(["python", "train.py", "--batch-size", "32", "--workers=0"]).found;
 * rewriteArgv(["python", "train.py", "--batch-size", "32"], found, { batch_size: 128 }); // [..., "--batch-size", "128"]
 * ```
 * @module
 */
import type { KnobValue, Knobs } from "./types.ts";

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

/** Extra names (normalised: no dashes, `-` → `_`, lower case) that argv flags use for the known knobs. */
const ARGV_ALIASES: Readonly<Record<string, readonly string[]>> = {
  batch_size: ["batch_size", "micro_batch_size", "per_device_train_batch_size", "train_batch_size", "bs", "batch", "train_bs", "batchsize"],
  accumulation: [
    "accumulate_grad_batches",
    "gradient_accumulation_steps",
    "accumulation",
    "grad_accum_steps",
    "grad_accum",
    "accum_steps",
    "accumulation_steps",
    "gradient_accumulation",
  ],
  precision: ["precision", "mixed_precision", "dtype"],
  num_workers: ["num_workers", "dataloader_num_workers", "workers", "n_workers", "loader_workers"],
  pin_memory: ["pin_memory", "dataloader_pin_memory"],
  persistent_workers: ["persistent_workers", "dataloader_persistent_workers"],
  prefetch_factor: ["prefetch_factor", "dataloader_prefetch_factor"],
};
/** One-letter flags with a settled meaning in PyTorch's own examples (`-b 256`, `-j 4`). */
const SHORT_FLAGS: Readonly<Record<string, string>> = { b: "batch_size", j: "num_workers" };
/** Switches that turn a 16-bit precision on (Hugging Face `TrainingArguments`, many scripts). */
const PRECISION_SWITCHES: Readonly<Record<string, string>> = { bf16: "bf16-mixed", fp16: "fp16-mixed" };
/**
 * How scripts spell a precision on their command line besides brim's own names: torch dtype names
 * (nanoGPT's `--dtype=bfloat16`) and accelerate's `--mixed_precision no|fp16|bf16`. A value is read
 * into brim's name and written back in the spelling the command used.
 */
const PRECISION_SPELLINGS: readonly Readonly<Record<string, string>>[] = [
  { fp32: "float32", "bf16-mixed": "bfloat16", "fp16-mixed": "float16" },
  { fp32: "no", "bf16-mixed": "bf16", "fp16-mixed": "fp16" },
];

function spellingOf(written: string): Readonly<Record<string, string>> | undefined {
  return PRECISION_SPELLINGS.find((spelling) => Object.values(spelling).includes(written.toLowerCase()));
}

const INTEGER_KNOBS = new Set(["batch_size", "accumulation", "num_workers", "prefetch_factor"]);
const BOOLEAN_KNOBS = new Set(["pin_memory", "persistent_workers"]);

/** A value the flag can hold as its knob: a `--dtype` is precision only when it names one (not `int8`). */
function argvKnobValue(knob: string, flag: string, text: string): KnobValue | null {
  if (knob === "precision" && /dtype$/i.test(flag) && spellingOf(text) === undefined) return null;
  return argvValue(knob, text);
}

function knobOfName(name: string): string | null {
  for (const [knob, names] of Object.entries(ARGV_ALIASES)) if (names.includes(name)) return knob;
  return null;
}

/** The knob a flag's name stands for: the last dotted segment, without dashes, `-` as `_`. */
function knobOfFlag(flag: string): string | null {
  if (/^-[A-Za-z]$/.test(flag)) return SHORT_FLAGS[flag.slice(1)] ?? null;
  if (!flag.startsWith("--")) return null;
  const last = flag.slice(2).split(".").pop() ?? "";
  return knobOfName(last.toLowerCase().replace(/-/g, "_"));
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
  if (knob === "precision") {
    const spelling = spellingOf(text);
    if (spelling !== undefined) return Object.keys(spelling).find((name) => spelling[name] === text.toLowerCase()) ?? null;
  }
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
      const switchKnob = PRECISION_SWITCHES[flag.replace(/^--?/, "").toLowerCase()];
      if (equals < 0 && switchKnob !== undefined && flag.startsWith("--") && !/^(true|false)$/i.test(command[index + 1] ?? "")) {
        add({ knob: "precision", index, form: "switch", flag, value: switchKnob });
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
      const knob = knobOfName((key.split(".").pop() ?? "").toLowerCase().replace(/-/g, "_"));
      const value = knob === null ? null : argvKnobValue(knob, key, override[3] as string);
      if (knob !== null && value !== null) add({ knob, index, form: "override", flag: `${override[1] ?? ""}${key}`, value });
    }
  }
  return { found, notes };
}

function formatValue(value: KnobValue, written: string | undefined): string {
  const spelling = typeof value === "string" && written !== undefined ? spellingOf(written) : undefined;
  if (spelling !== undefined && typeof value === "string" && spelling[value] !== undefined) return spelling[value];
  if (typeof value !== "boolean") return String(value);
  if (written !== undefined && /^(True|False)$/.test(written)) return value ? "True" : "False";
  if (written !== undefined && /^[01]$/.test(written)) return value ? "1" : "0";
  return String(value);
}

function precisionSwitch(value: KnobValue, flag: string): string | null {
  const dashes = flag.startsWith("--") ? "--" : "-";
  for (const [name, precision] of Object.entries(PRECISION_SWITCHES)) if (precision === value) return `${dashes}${name}`;
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
        out.push(arg, formatValue(value, command[index + 1]));
        index++;
        break;
      case "equals":
        out.push(`${entry.flag}=${formatValue(value, arg.slice(arg.indexOf("=") + 1))}`);
        break;
      case "override":
        out.push(`${entry.flag}=${formatValue(value, arg.slice(arg.indexOf("=") + 1))}`);
        break;
      case "switch": {
        const flag = entry.knob === "precision" ? precisionSwitch(value, entry.flag) : value === true ? entry.flag : null;
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
