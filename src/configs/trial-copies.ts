/**
 * Config copies a killed tune or plan left behind. brim runs the user's job with knob values by
 * writing them into a copy beside the user's config, `.<name>.brim-<kind>-<owner>-<index><ext>`
 * ({@link copyPathOf}; kind `trial` for a tune's trials, owner its tune id; kind `plan` for
 * `brim plan -- <command>`'s measuring runs, owner the plan's session id), and removes it after the
 * run; a brim killed with SIGKILL before its watchdog started cannot. Here: the copies' names, which
 * tune state a record is in, and the removal of copies whose tune or plan no longer runs
 * ({@link removeStaleTrialCopies}, called when `brim tune` and `brim plan -- <command>` start).
 * An interrupted tune's tune.json has no end and no winner: `apply` says it was interrupted
 * ({@link interruptedMessage}) rather than "no winner".
 *
 * @example
 * ```ts
 * copyPathOf("/p/conf.yaml", "plan", "20261122-101000-aa01", 1); // "/p/.conf.yaml.brim-plan-20261122-101000-aa01-1.yaml"
 * await removeStaleTrialCopies("/p/conf.yaml", store);
 * ```
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

function extensionOf(name: string): string {
  return name.includes(".") ? name.slice(name.lastIndexOf(".")) : "";
}

/**
 * The kinds of config copy brim writes: a tune's trial, a plan's measuring run.
 *
 * @example
 * ```ts
 * COPY_KINDS; // ["trial", "plan"]
 * ```
 */
export const COPY_KINDS = ["trial", "plan"] as const;
/** One of {@link COPY_KINDS}. */
export type CopyKind = (typeof COPY_KINDS)[number];

/**
 * One config copy found beside a config, of any kind.
 *
 * @example
 * ```ts
 * const c: BrimCopy = { path: "/p/.conf.yaml.brim-plan-20261122-101000-aa01-0.yaml", kind: "plan", owner: "20261122-101000-aa01", index: 0 };
 * ```
 */
export interface BrimCopy {
  path: string;
  kind: CopyKind;
  /** the tune id of a trial's copy, the plan session's id of a plan's */
  owner: string;
  index: number;
}

/**
 * Where the copy of `configPath` for run `index` of tune or plan `owner` goes: beside it, hidden,
 * with the same extension (the job's config reader goes by it).
 *
 * @example
 * ```ts
 * copyPathOf("/p/conf.yaml", "trial", "20261122-101000-aa01", 3); // "/p/.conf.yaml.brim-trial-20261122-101000-aa01-3.yaml"
 * ```
 */
export function copyPathOf(configPath: string, kind: CopyKind, owner: string, index: number): string {
  const name = basename(configPath);
  return join(dirname(configPath), `.${name}.brim-${kind}-${owner}-${index}${extensionOf(name)}`);
}

/**
 * The copies brim wrote beside `configPath`, of every kind, whatever tune or plan made them.
 *
 * @example
 * ```ts
 * (await brimCopiesOf("conf.yaml")).map((c) => `${c.kind} ${c.owner}`);
 * ```
 */
export async function brimCopiesOf(configPath: string): Promise<BrimCopy[]> {
  const dir = dirname(configPath);
  const name = basename(configPath);
  const kinds = COPY_KINDS.join("|");
  const pattern = new RegExp(`^\\.${escapeRegExp(name)}\\.brim-(${kinds})-(\\d{8}-\\d{6}-[0-9a-f]{4})-(\\d+)${escapeRegExp(extensionOf(name))}$`);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  return names.flatMap((n) => {
    const m = pattern.exec(n);
    return m?.[2] === undefined ? [] : [{ path: join(dir, n), kind: m[1] as CopyKind, owner: m[2], index: Number(m[3]) }];
  });
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
  return (await brimCopiesOf(configPath)).flatMap((c) => (c.kind === "trial" ? [{ path: c.path, tuneId: c.owner, index: c.index }] : []));
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
 * Where the plan that wrote `copy` stands, read from its measuring run (the run in the store whose
 * command names the copy): `ended` (the run has its end), `running` (no end, and it wrote within
 * {@link TUNE_QUIET_S}), `interrupted` (no end and quiet), or `missing` (no such run in the store:
 * the plan may use another store, or was killed before its run began).
 *
 * @example
 * ```ts
 * await planCopyState(store, { path: "/p/.conf.yaml.brim-plan-20261122-101000-aa01-0.yaml", owner: "20261122-101000-aa01" }); // "ended"
 * ```
 */
export async function planCopyState(
  store: RunStore,
  copy: Pick<BrimCopy, "path" | "owner">,
  nowMs = Date.now(),
): Promise<"ended" | "running" | "interrupted" | "missing"> {
  // a plan's measuring runs begin right after its session id was drawn
  for (const id of (await store.runIds()).filter((runId) => runId >= copy.owner).slice(0, 16)) {
    try {
      const meta = await store.readRunMeta(id);
      if (!meta.command.some((arg) => arg.includes(copy.path))) continue;
      if (meta.end != null) return "ended";
      const written = await stat(join(store.runDir(id), "timeline.ndjson")).then(
        (st) => st.mtimeMs,
        () => Date.parse(meta.started_at),
      );
      return (nowMs - written) / 1000 <= TUNE_QUIET_S ? "running" : "interrupted";
    } catch {
      // a damaged run says nothing about the plan
    }
  }
  return "missing";
}

/**
 * Removes the copies beside `configPath` (a tune's trials' and a plan's measuring runs') whose tune
 * or plan no longer runs (interrupted or ended); a running one's copies are left alone, and those of
 * a tune or plan the store does not know (it may run with another store) until they are a day old.
 * Resolves with the paths removed.
 *
 * @example
 * ```ts
 * const removed = await removeStaleTrialCopies("conf.yaml", store);
 * if (removed.length > 0) console.error(`removed ${removed.length} copies an interrupted tune or plan left`);
 * ```
 */
export async function removeStaleTrialCopies(configPath: string, store: RunStore, nowMs = Date.now()): Promise<string[]> {
  const removed: string[] = [];
  const states = new Map<string, string>();
  for (const copy of await brimCopiesOf(configPath)) {
    let state = copy.kind === "trial" ? states.get(copy.owner) : undefined;
    if (state === undefined) {
      state = copy.kind === "trial" ? await tuneState(store, copy.owner, nowMs) : await planCopyState(store, copy, nowMs);
      if (copy.kind === "trial") states.set(copy.owner, state);
    }
    if (state === "running") continue;
    // A tune or plan this store does not know may run with another store: its copy goes only once it is old.
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
