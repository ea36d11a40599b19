/**
 * Trial copies a killed tune left behind. A tune writes each trial's values into a copy beside the
 * user's config (`.<name>.brim-trial-<tune id>-<index><ext>`) and removes it after the trial; a
 * `brim tune` killed with SIGKILL cannot. Its tune.json then has no end and no winner: it was
 * interrupted, and saying "no winner" would be wrong. Here: which tune state a record is in, and
 * the removal of copies whose tune no longer runs.
 *
 * Where tune should call these (src/tune is not edited here): `removeStaleTrialCopies` for each bound
 * config file when `brim tune` starts (before its first trial) and when `apply` runs; `tuneState`
 * in `applyTune` before "has no winner", answering `interruptedMessage` when it is "interrupted".
 *
 * @module
 */
import { readdir, stat, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import type { RunStore } from "../record/store.ts";
import type { TuneRecord } from "../record/types.ts";

/**
 * A tune that has not written anything for this long while it has no end is not running (the same
 * rule as the dashboard's "unfinished" runs).
 *
 * @example
 * ```ts
 * const quiet = Date.now() / 1000 - mtimeS > TUNE_QUIET_S;
 * ```
 */
export const TUNE_QUIET_S = 120;

const MISSING_AFTER_MS = 24 * 3600_000;

/**
 * One trial copy found beside a config.
 *
 * @example
 * ```ts
 * const c: TrialCopy = { path: ".conf.yaml.brim-trial-20261122-101000-aa01-3.yaml", tuneId: "20261122-101000-aa01", index: 3 };
 * ```
 */
export interface TrialCopy {
  path: string;
  tuneId: string;
  index: number;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * The trial copies beside `configPath`, whatever tune made them.
 *
 * @example
 * ```ts
 * (await trialCopiesOf("conf.yaml")).map((c) => c.tuneId);
 * ```
 */
export async function trialCopiesOf(configPath: string): Promise<TrialCopy[]> {
  const dir = dirname(configPath);
  const name = basename(configPath);
  const ext = name.includes(".") ? name.slice(name.lastIndexOf(".")) : "";
  const pattern = new RegExp(`^\\.${escapeRegExp(name)}\\.brim-trial-(\\d{8}-\\d{6}-[0-9a-f]{4})-(\\d+)${escapeRegExp(ext)}$`);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  return names.flatMap((n) => {
    const m = pattern.exec(n);
    return m?.[1] === undefined ? [] : [{ path: join(dir, n), tuneId: m[1], index: Number(m[2]) }];
  });
}

/**
 * Where a tune stands: `ended` (it has its end), `running` (no end, and it or its newest trial run
 * wrote within {@link TUNE_QUIET_S}), `interrupted` (no end and quiet: `brim tune` was killed), or
 * `missing` (no such tune in the store).
 *
 * @example
 * ```ts
 * if ((await tuneState(store, id)) === "interrupted") console.log(interruptedMessage(await store.readTune(id)));
 * ```
 */
export async function tuneState(store: RunStore, tuneId: string, nowMs = Date.now()): Promise<"ended" | "running" | "interrupted" | "missing"> {
  let tune: TuneRecord;
  try {
    tune = await store.readTune(tuneId);
  } catch {
    return "missing";
  }
  if (tune.ended_at !== null) return "ended";
  const written: number[] = [];
  const mtime = async (path: string): Promise<void> => {
    try {
      written.push((await stat(path)).mtimeMs);
    } catch {
      // not there: says nothing
    }
  };
  await mtime(join(store.tuneDir(tuneId), "tune.json"));
  const runIds = (await store.runIds()).filter((id) => id >= tuneId).slice(-8);
  for (const id of runIds) {
    try {
      const meta = await store.readRunMeta(id);
      if (meta.tune_id !== tuneId) continue;
      await mtime(join(store.runDir(id), "timeline.ndjson"));
      await mtime(join(store.runDir(id), "run.json"));
    } catch {
      // a damaged run says nothing about the tune
    }
  }
  const latest = Math.max(Date.parse(tune.started_at), ...written);
  return (nowMs - latest) / 1000 <= TUNE_QUIET_S ? "running" : "interrupted";
}

/**
 * What `apply` says for an interrupted tune, in place of "no winner".
 *
 * @example
 * ```ts
 * interruptedMessage(tune); // "tune 20261122-101000-aa01 was interrupted (brim tune was killed after 3 trials, none finished): nothing to apply; run brim tune again"
 * ```
 */
export function interruptedMessage(tune: TuneRecord): string {
  const done = tune.trials.filter((t) => t.end === "ok").length;
  return `tune ${tune.id} was interrupted (brim tune ended without finishing it, after ${tune.trials.length} trial${tune.trials.length === 1 ? "" : "s"}, ${done} finished): nothing to apply; run brim tune again`;
}

/**
 * Removes the trial copies beside `configPath` whose tune no longer runs (interrupted or ended); a
 * running tune's copies are left alone, and those of a tune the store does not know (it may run with
 * another store) until they are a day old. Resolves with the paths removed.
 *
 * @example
 * ```ts
 * const removed = await removeStaleTrialCopies("conf.yaml", store);
 * if (removed.length > 0) console.error(`removed ${removed.length} trial copies an interrupted tune left`);
 * ```
 */
export async function removeStaleTrialCopies(configPath: string, store: RunStore, nowMs = Date.now()): Promise<string[]> {
  const removed: string[] = [];
  const states = new Map<string, string>();
  for (const copy of await trialCopiesOf(configPath)) {
    let state = states.get(copy.tuneId);
    if (state === undefined) {
      state = await tuneState(store, copy.tuneId, nowMs);
      states.set(copy.tuneId, state);
    }
    if (state === "running") continue;
    // A tune this store does not know may run with another store: its copy goes only once it is old.
    if (
      state === "missing" &&
      nowMs -
        (await stat(copy.path).then(
          (st) => st.mtimeMs,
          () => 0,
        )) <
        MISSING_AFTER_MS
    )
      continue;
    try {
      await unlink(copy.path);
      removed.push(copy.path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }
  return removed;
}
