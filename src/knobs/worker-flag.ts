/**
 * Loader workers under a flag brim does not know (`--threads`, `-j`, `--num-proc`; issue 36).
 *
 * The attach tells, in a DataLoader's "loader" event, where its `num_workers` comes from when the file
 * that builds it declares the option with argparse (`num_workers_from`: the option's dest, its flags,
 * the expression; python/brim/_loader_args.py). Trial 0's loader events and the command line then
 * give the num_workers knob as an argv knob on that flag, as the batch size is found from where it comes.
 */
import type { ArgvKnob } from "./argv.ts";

/** Where a loader's num_workers comes from, as the attach says it. */
export interface WorkersSource {
  dest: string;
  flags: string[];
  expr: string;
}

/** A timeline event as far as this file reads it. */
export interface LoaderEventLike {
  event?: string;
  details?: Record<string, unknown>;
}

/**
 * The source of num_workers one loader event's details give (`num_workers_from`), null for none.
 *
 * @example
 * ```ts
 * workersSourceIn({ num_workers_from: { dest: "threads", flags: ["--threads"], expr: "args.threads" } })?.flags; // ["--threads"]
 * ```
 */
export function workersSourceIn(details: Record<string, unknown> | undefined): WorkersSource | null {
  return sourceOf(details);
}

function sourceOf(details: Record<string, unknown> | undefined): WorkersSource | null {
  const from = details?.num_workers_from;
  if (typeof from !== "object" || from === null) return null;
  const { dest, flags, expr } = from as Record<string, unknown>;
  if (typeof dest !== "string" || !Array.isArray(flags) || !flags.every((f) => typeof f === "string") || flags.length === 0) return null;
  return { dest, flags: flags, expr: typeof expr === "string" ? expr : dest };
}

/**
 * The source of num_workers of the training loader: the first loader event that says one, preferring a
 * loader seen feeding training steps (`train`, the loader numbers of "loader_use" events).
 *
 * @example
 * ```ts
 * workersSourceOf([{ event: "loader", details: { loader: 0, num_workers_from: { dest: "threads", flags: ["-j", "--threads"], expr: "args.threads" } } }]);
 * // { dest: "threads", flags: ["-j", "--threads"], expr: "args.threads" }
 * ```
 */
export function workersSourceOf(events: readonly LoaderEventLike[], train: ReadonlySet<number> = new Set()): WorkersSource | null {
  const loaders = events.filter((e) => e.event === "loader");
  const trained = loaders.filter((e) => typeof e.details?.loader === "number" && train.has(e.details.loader));
  for (const e of [...trained, ...loaders]) {
    const source = sourceOf(e.details);
    if (source !== null) return source;
  }
  return null;
}

const integer = (text: string | undefined): number | null => (text !== undefined && /^\d+$/.test(text) ? Number(text) : null);

/**
 * The num_workers knob on the command line, on the flag the job reads it from: `-j 4`, `--threads=4`,
 * `-j4`; null when the command does not give it (the job's default is in force: see {@link workersFlagNote}).
 *
 * @example
 * ```ts
 * workersArgvKnob(["python", "train.py", "-j", "4"], { dest: "threads", flags: ["-j", "--threads"], expr: "args.threads" });
 * // { knob: "num_workers", index: 2, form: "separate", flag: "-j", value: 4 }
 * ```
 */
export function workersArgvKnob(command: readonly string[], source: WorkersSource): ArgvKnob | null {
  for (let index = 1; index < command.length; index++) {
    const arg = command[index] as string;
    if (arg === "--") break;
    for (const flag of source.flags) {
      if (arg === flag) {
        const value = integer(command[index + 1]);
        if (value !== null) return { knob: "num_workers", index, form: "separate", flag, value };
      } else if (arg.startsWith(`${flag}=`)) {
        const value = integer(arg.slice(flag.length + 1));
        if (value !== null) return { knob: "num_workers", index, form: "equals", flag, value };
      }
    }
  }
  return null;
}

/**
 * The line for a job whose workers come from a flag the command does not give.
 *
 * @example
 * ```ts
 * workersFlagNote({ dest: "threads", flags: ["-j", "--threads"], expr: "args.threads" }, 0);
 * // "DataLoader workers come from -j/--threads (num_workers=args.threads), which the command does not give (the job's default, 0, is in force): add --threads N to the command to let brim tune them"
 * ```
 */
export function workersFlagNote(source: WorkersSource, inForce: number | null): string {
  const long = source.flags.find((flag) => flag.startsWith("--")) ?? source.flags[0];
  const now = inForce === null ? "" : ` (the job's default, ${inForce}, is in force)`;
  return `DataLoader workers come from ${source.flags.join("/")} (num_workers=${source.expr}), which the command does not give${now}: add ${long} N to the command to let brim tune them`;
}
