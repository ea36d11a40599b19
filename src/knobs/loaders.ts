/**
 * The DataLoaders a trial built, as the attach saw them (one "loader" event per loader, told apart by
 * object, and a "loader_use" event once its use is seen: training or validation): the real batch size, workers and pinning, the data they see (per rank under a sharding
 * sampler) and where in the code they are built. Used to cap the micro-batch at the data, to name a
 * trial that asked for a batch larger than the data, and to tell the user the file:line of a value
 * written in the code that brim cannot vary. Pure but for reading one source line.
 *
 * @example
 * ```ts
 * const loaders = loadersOf(run.timeline.events);
 * dataLimit(loaders, 32); // { samples: 2048, where: "train.py:21" }
 * ```
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { CodeKnob } from "./binding.ts";
import { NEED_WORKERS } from "./lists.ts";
import type { Knobs } from "./specs.ts";
import { workersSourceIn, type WorkersSource } from "./worker-flag.ts";

/** A DataLoader the job built. */
export interface LoaderSeen {
  /** file:line of the job's code that built it, null when not found */
  where: string | null;
  batchSize: number | null;
  numWorkers: number | null;
  pinMemory: boolean | null;
  /** null where the attach did not say (older events) or the loader has no workers to keep */
  persistentWorkers?: boolean | null;
  prefetchFactor?: number | null;
  dropLast: boolean | null;
  datasetLen: number | null;
  /** samples this rank's sampler yields (the data set's size without sharding) */
  samplesPerRank: number | null;
  /** what the attach saw it feed: "train" (optimizer steps) or "eval" (batches with gradients off); null when unseen (older events, never iterated) */
  use?: "train" | "eval" | null;
  /** the command-line option its num_workers comes from, when the attach found one (argparse) */
  workersFrom?: WorkersSource | null;
}

const num = (value: unknown): number | null => (typeof value === "number" && Number.isFinite(value) ? value : null);
const bool = (value: unknown): boolean | null => (typeof value === "boolean" ? value : null);

/**
 * The loaders in a trial's events.
 *
 * @example
 * ```ts
 * loadersOf([{ event: "loader", details: { where: "t.py:3", batch_size: 32, dataset_len: 100 } }])[0]?.batchSize; // 32
 * ```
 */
export function loadersOf(events: readonly { event: string; details: Record<string, unknown> }[]): LoaderSeen[] {
  // each loader's use, by its number (a loader told apart by object, not by line: "loader_use" events)
  const uses = new Map<number, "train" | "eval">();
  for (const { event, details } of events) {
    const loader = num(details.loader);
    if (event !== "loader_use" || loader === null || (details.use !== "train" && details.use !== "eval")) continue;
    if (uses.get(loader) !== "train") uses.set(loader, details.use);
  }
  const rank = (loader: LoaderSeen): number => (loader.use === "train" ? 0 : loader.use === "eval" ? 2 : 1);
  // a loader a library built again from the job's (accelerate's prepare, Lightning's distributed
  // sampler) comes again under the job's loader's number: the later details are the ones iterated
  const last = new Map<number, number>();
  events.forEach(({ event, details }, i) => {
    const loader = num(details.loader);
    if (event === "loader" && loader !== null) last.set(loader, i);
  });
  const seen = events
    .filter((entry, i) => entry.event === "loader" && (num(entry.details.loader) === null || last.get(num(entry.details.loader) ?? -1) === i))
    .map(({ details }) => ({
      where: typeof details.where === "string" ? details.where : null,
      batchSize: num(details.batch_size),
      numWorkers: num(details.num_workers),
      pinMemory: bool(details.pin_memory),
      persistentWorkers: bool(details.persistent_workers),
      prefetchFactor: num(details.prefetch_factor),
      dropLast: bool(details.drop_last),
      datasetLen: num(details.dataset_len),
      samplesPerRank: num(details.samples_per_rank) ?? num(details.dataset_len),
      use: uses.get(num(details.loader) ?? -1) ?? null,
      workersFrom: workersSourceIn(details),
    }));
  // the training loaders first (the one the tune's ceilings and hints are about), validation last
  return seen
    .map((loader, i) => ({ loader, i }))
    .sort((a, b) => rank(a.loader) - rank(b.loader) || a.i - b.i)
    .map(({ loader }) => loader);
}

/**
 * The data the training loader sees: among the loaders seen training (else those not seen only in
 * validation), the one whose batch size is the micro-batch (the first one otherwise), its samples
 * per rank. Null when no loader says.
 *
 * @example
 * ```ts
 * dataLimit([{ where: "t.py:3", batchSize: 32, samplesPerRank: 1000, ... }], 32); // { samples: 1000, where: "t.py:3", sharded: false }
 * ```
 */
export function dataLimit(loaders: readonly LoaderSeen[], micro: number | null): { samples: number; where: string | null; sharded: boolean } | null {
  // a validation loader never bounds the training micro-batch; a loader seen training is the one
  const candidates = loaders.some((l) => l.use === "train") ? loaders.filter((l) => l.use === "train") : loaders.filter((l) => l.use !== "eval");
  const loader = candidates.find((l) => micro !== null && l.batchSize === micro) ?? candidates[0];
  if (loader === undefined || loader.samplesPerRank === null || loader.samplesPerRank <= 0) return null;
  return { samples: loader.samplesPerRank, where: loader.where, sharded: loader.datasetLen !== null && loader.samplesPerRank < loader.datasetLen };
}

/**
 * Values written in the job's code that brim found no knob for: the loader's batch size and workers,
 * with the file:line to change (and the text of that line when it holds the value as a literal).
 *
 * @example
 * ```ts
 * codeValues(loaders, { num_workers: 0 }); // ["batch_size=64 is written in the code at train.py:21 (DataLoader(ds, batch_size=64)) ..."]
 * ```
 */
export function codeValues(loaders: readonly LoaderSeen[], knobs: Knobs, readLine: (where: string) => string | null = sourceLine): string[] {
  const out: string[] = [];
  const loader = loaders[0];
  if (loader?.where == null) return out;
  const line = readLine(loader.where);
  const shown = line === null ? "" : ` (${line.trim().length > 80 ? `${line.trim().slice(0, 79)}…` : line.trim()})`;
  const library = libraryOf(loader.where);
  const at =
    library === undefined
      ? `in the code at ${loader.where.split("/").slice(-2).join("/")}${shown}`
      : `inside ${library} (${loader.where.slice(loader.where.indexOf(`/${library}/`) + 1)})`;
  const fixable = "give the flag that sets it on the command line, or expose it as one (--batch-size) or as a config key, or read it with brim.knob";
  if (knobs.batch_size === undefined && loader.batchSize !== null)
    out.push(`batch_size=${loader.batchSize} is decided ${at}: brim cannot vary it there; ${fixable}("batch_size", ${loader.batchSize})`);
  if (knobs.num_workers === undefined && loader.numWorkers !== null)
    out.push(
      `num_workers=${loader.numWorkers} is decided ${at}: brim cannot vary it there; ${fixable.replace("--batch-size", "--num-workers")}("num_workers", ${loader.numWorkers})`,
    );
  return out;
}

/**
 * The loader's batch size and workers that its line of code writes as integer literals
 * (`DataLoader(ds, batch_size=20)`, a JAX loop's `batch_size = 128`), for knobs no other binding
 * found: trials can vary them in memory (brim._code). Only when the literal is the value the job ran with.
 *
 * @example
 * ```ts
 * codeKnobs([{ where: "/p/train.py:48", batchSize: 20, ... }], {}); // [{ knob: "batch_size", via: "code", file: "/p/train.py", line: 48, name: "batch_size", value: 20 }]
 * ```
 */
export function codeKnobs(loaders: readonly LoaderSeen[], knobs: Knobs, readLine: (where: string) => string | null = sourceLine): CodeKnob[] {
  const loader = loaders[0];
  if (loader?.where == null) return [];
  const colon = loader.where.lastIndexOf(":");
  const line = Number(loader.where.slice(colon + 1));
  const text = readLine(loader.where)?.replace(/#.*$/, "");
  if (colon <= 0 || !Number.isInteger(line) || text === undefined) return [];
  const found: CodeKnob[] = [];
  for (const [knob, seen] of [
    ["batch_size", loader.batchSize],
    ["num_workers", loader.numWorkers],
  ] as const) {
    if (knobs[knob] !== undefined || seen === null) continue;
    const literal = new RegExp(`\\b${knob}\\s*=\\s*(\\d+)\\b(?!\\s*[.\\d])`).exec(text);
    if (literal?.[1] !== undefined && Number(literal[1]) === seen && !new RegExp(`\\b${knob}\\s*==`).test(text))
      found.push({ knob, via: "code", file: loader.where.slice(0, colon), line, name: knob, value: seen });
  }
  return found;
}

/** The package of a place inside site-packages (a loader deepspeed.initialize builds is not the user's line to edit), else undefined. */
function libraryOf(where: string): string | undefined {
  return /\/(?:site|dist)-packages\/([^/]+)\//.exec(where)?.[1];
}

/**
 * A knob's value as Python writes it.
 *
 * @example
 * ```ts
 * pythonLiteral(true); // "True"
 * ```
 */
export function pythonLiteral(value: number | string | boolean): string {
  return typeof value === "boolean" ? (value ? "True" : "False") : typeof value === "string" ? JSON.stringify(value) : String(value);
}

/** DataLoader arguments the attach can set for a trial, in the order they are listed. */
export const LOADER_ARGUMENTS = ["num_workers", "persistent_workers", "prefetch_factor", "pin_memory"] as const;

/**
 * The training loader's arguments that no other binding reaches, as knobs the attach sets on that
 * DataLoader for a trial (BRIM_LOADER_ARGS): whatever its line writes for them (a variable, an
 * expression, nothing at all). Only for a loader built in the job's own code, only arguments the
 * attach reported, and persistent workers and a prefetch factor only where the loader has workers.
 *
 * @example
 * ```ts
 * loaderArguments([{ where: "/p/main.py:107", numWorkers: 2, persistentWorkers: false, prefetchFactor: 2, pinMemory: false, ... }], { num_workers: 2 });
 * // [{ knob: "persistent_workers", via: "code", file: "/p/main.py", line: 107, name: "persistent_workers", value: false, argument: true }, prefetch_factor 2, pin_memory false]
 * ```
 */
export function loaderArguments(loaders: readonly LoaderSeen[], knobs: Knobs): CodeKnob[] {
  const loader = loaders[0];
  const where = loader?.where;
  if (loader === undefined || where == null || libraryOf(where) !== undefined) return [];
  const colon = where.lastIndexOf(":");
  const line = Number(where.slice(colon + 1));
  if (colon <= 0 || !Number.isInteger(line) || line < 1) return [];
  const file = where.slice(0, colon);
  const seen: Record<(typeof LOADER_ARGUMENTS)[number], number | boolean | null> = {
    num_workers: loader.numWorkers,
    persistent_workers: loader.persistentWorkers ?? null,
    prefetch_factor: loader.prefetchFactor ?? null,
    pin_memory: loader.pinMemory,
  };
  // persistent workers and a prefetch factor mean nothing to a loader without workers (nor does the search vary them there)
  const workers = typeof knobs.num_workers === "number" ? knobs.num_workers : loader.numWorkers;
  const needWorkers = (knob: string): boolean => NEED_WORKERS.has(knob) && !(workers !== null && workers > 0);
  return LOADER_ARGUMENTS.flatMap((knob) => {
    const value = seen[knob];
    return knobs[knob] !== undefined || value === null || needWorkers(knob)
      ? []
      : [{ knob, via: "code" as const, file, line, name: knob, value, argument: true as const }];
  });
}

function sourceLine(where: string): string | null {
  const colon = where.lastIndexOf(":");
  const line = Number(where.slice(colon + 1));
  if (colon <= 0 || !Number.isInteger(line) || line < 1) return null;
  try {
    return readFileSync(where.slice(0, colon), "utf8").split("\n")[line - 1] ?? null;
  } catch {
    return null;
  }
}

/**
 * The job's own script: the first `.py` argument, or the module of `-m` (`pkg.mod` as `pkg/mod.py` in
 * `cwd`); null when neither is a file.
 *
 * @example
 * ```ts
 * mainScript(["python", "-m", "examples.mnist_classifier"], "/jax"); // "/jax/examples/mnist_classifier.py"
 * ```
 */
export function mainScript(command: readonly string[], cwd: string): string | null {
  const at = command.indexOf("-m");
  const module = at >= 1 ? command[at + 1] : undefined;
  const candidates = module !== undefined ? [join(cwd, ...module.split(".")) + ".py", join(cwd, ...module.split("."), "__main__.py")] : [];
  const script = command.slice(1).find((arg) => arg.endsWith(".py") && !arg.startsWith("-"));
  if (script !== undefined) candidates.push(resolve(cwd, script));
  return candidates.find((path) => existsSync(path)) ?? null;
}

/**
 * A batch size written as a literal in the job's script where no DataLoader tells it (a JAX loop's
 * `batch_size = 128`, a default argument `batch_size=32`): the one line that sets it, as a loader
 * for {@link codeValues}; null when no line or several different ones do.
 *
 * @example
 * ```ts
 * scriptBatchLiteral("/jax/examples/mnist_classifier.py", "  num_epochs = 10\n  batch_size = 128\n"); // { where: "/jax/examples/mnist_classifier.py:2", batchSize: 128, ... }
 * ```
 */
export function scriptBatchLiteral(path: string, text: string): LoaderSeen | null {
  const found: { line: number; value: number }[] = [];
  let inDocstring: string | null = null;
  text.split("\n").forEach((line, i) => {
    // code only: not inside a triple-quoted string, string literals and comments left out
    let rest = line;
    if (inDocstring !== null) {
      const end = rest.indexOf(inDocstring);
      if (end < 0) return;
      rest = rest.slice(end + 3);
      inDocstring = null;
    }
    rest = rest.replace(/("""|''')[\s\S]*?\1/g, "");
    const opened = /("""|''')/.exec(rest);
    if (opened?.[1] !== undefined) {
      inDocstring = opened[1];
      rest = rest.slice(0, opened.index);
    }
    const code = rest.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""').replace(/#.*$/, "");
    const m = /\bbatch_size\s*=\s*(\d+)\b(?!\s*[.\d])/.exec(code);
    if (m?.[1] !== undefined && !/\bbatch_size\s*==/.test(code)) found.push({ line: i + 1, value: Number(m[1]) });
  });
  const first = found[0];
  if (first === undefined || found.some((f) => f.value !== first.value) || found.length > 1) return null;
  return { where: `${path}:${first.line}`, batchSize: first.value, numWorkers: null, pinMemory: null, dropLast: null, datasetLen: null, samplesPerRank: null };
}

/**
 * The batch size written in the job's script ({@link scriptBatchLiteral}) as a loader list for
 * {@link codeValues}: for a job whose steps came through no DataLoader (a JAX loop). Empty when none.
 *
 * @example
 * ```ts
 * codeValues(scriptLiteral(["python", "-m", "examples.mnist_classifier"], "/jax"), {}); // ["batch_size=128 is decided in the code at examples/mnist_classifier.py:57 ..."]
 * ```
 */
export function scriptLiteral(command: readonly string[], cwd: string): LoaderSeen[] {
  const path = mainScript(command, cwd);
  if (path === null) return [];
  try {
    const found = scriptBatchLiteral(path, readFileSync(path, "utf8"));
    return found === null ? [] : [found];
  } catch {
    return [];
  }
}
