/**
 * The DataLoaders a trial built, as the attach saw them (one "loader" event per place in the job's
 * code): the real batch size, workers and pinning, the data they see (per rank under a sharding
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
import { readFileSync } from "node:fs";
import type { Knobs } from "./types.ts";

/** A DataLoader the job built. */
export interface LoaderSeen {
  /** file:line of the job's code that built it, null when not found */
  where: string | null;
  batchSize: number | null;
  numWorkers: number | null;
  pinMemory: boolean | null;
  dropLast: boolean | null;
  datasetLen: number | null;
  /** samples this rank's sampler yields (the data set's size without sharding) */
  samplesPerRank: number | null;
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
  return events
    .filter((entry) => entry.event === "loader")
    .map(({ details }) => ({
      where: typeof details.where === "string" ? details.where : null,
      batchSize: num(details.batch_size),
      numWorkers: num(details.num_workers),
      pinMemory: bool(details.pin_memory),
      dropLast: bool(details.drop_last),
      datasetLen: num(details.dataset_len),
      samplesPerRank: num(details.samples_per_rank) ?? num(details.dataset_len),
    }));
}

/**
 * The data the training loader sees: the loader whose batch size is the micro-batch (the first one
 * otherwise), its samples per rank. Null when no loader says.
 *
 * @example
 * ```ts
 * dataLimit([{ where: "t.py:3", batchSize: 32, samplesPerRank: 1000, ... }], 32); // { samples: 1000, where: "t.py:3", sharded: false }
 * ```
 */
export function dataLimit(loaders: readonly LoaderSeen[], micro: number | null): { samples: number; where: string | null; sharded: boolean } | null {
  const loader = loaders.find((l) => micro !== null && l.batchSize === micro) ?? loaders[0];
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
  const at = `${loader.where.split("/").slice(-2).join("/")}${shown}`;
  const fixable = "give the flag that sets it on the command line, or expose it as one (--batch-size) or as a config key, or read it with brim.knob";
  if (knobs.batch_size === undefined && loader.batchSize !== null)
    out.push(`batch_size=${loader.batchSize} is decided in the code at ${at}: brim cannot vary it there; ${fixable}("batch_size", ${loader.batchSize})`);
  if (knobs.num_workers === undefined && loader.numWorkers !== null)
    out.push(
      `num_workers=${loader.numWorkers} is decided in the code at ${at}: brim cannot vary it there; ${fixable.replace("--batch-size", "--num-workers")}("num_workers", ${loader.numWorkers})`,
    );
  return out;
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
