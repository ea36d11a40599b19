/**
 * `brim runs`: the runs (and with `--tunes` the tunes) of the store, newest first, with their
 * `--name` and `--tag`s; `--name` and `--tag` pick, `--json` for scripts.
 *
 * @module
 */
import type { Command } from "commander";
import { hasLabels, listRuns, listTunes, type RunListItem, type TuneListItem } from "../dashboard/data.ts";
import { UsageError } from "../errors/index.ts";
import { formatRate, formatSeconds, table } from "../format.ts";
import { RunStore, storeRoot } from "../record/store.ts";
import { parseRecordName, parseTag } from "./labels.ts";
import type { Output } from "./output.ts";

/** Options of `brim runs`. */
export interface RunsCommandOptions {
  store?: string;
  name?: string;
  tag?: Record<string, string>;
  /** list tunes instead of runs */
  tunes?: boolean;
  /** trials of tunes too */
  trials?: boolean;
  limit: number;
  json?: boolean;
}

/** What `brim runs` lists. */
export type RunsCommandResult = { kind: "runs"; items: RunListItem[] } | { kind: "tunes"; items: TuneListItem[] };

/**
 * The runs (or tunes) of the store that have the name and tags asked for, newest first.
 *
 * @example
 * ```ts
 * const { items } = await runsCommand({ tag: { model: "resnet50" }, limit: 20 });
 * ```
 */
export async function runsCommand(options: RunsCommandOptions, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Promise<RunsCommandResult> {
  const store = new RunStore(storeRoot(options.store, env, cwd));
  const wanted = { ...(options.name !== undefined ? { name: options.name } : {}), ...(options.tag !== undefined ? { tags: options.tag } : {}) };
  if (options.tunes === true) return { kind: "tunes", items: (await listTunes(store)).filter((t) => hasLabels(t, wanted)).slice(0, options.limit) };
  const runs = (await listRuns(store)).filter((r) => (options.trials === true || r.kind === "run") && hasLabels(r, wanted));
  return { kind: "runs", items: runs.slice(0, options.limit) };
}

const tagText = (tags: Record<string, string>): string =>
  Object.entries(tags)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");

/**
 * The list as a table.
 *
 * @example
 * ```ts
 * out.stdout(renderRuns(await runsCommand({ limit: 20 })));
 * ```
 */
export function renderRuns(result: RunsCommandResult): string {
  if (result.items.length === 0) return `no ${result.kind} with that name and tags (brim runs --help)\n`;
  if (result.kind === "tunes") {
    const rows = result.items.map((t) => [
      t.id,
      t.name ?? "–",
      tagText(t.tags) || "–",
      t.damaged !== undefined ? "damaged" : t.running ? "running" : "ended",
      `${t.finished}/${t.trials}`,
      t.winner === null ? "no winner" : `${t.winner}${t.speedup !== null ? ` ×${t.speedup.toFixed(2)}` : ""}`,
      t.command,
    ]);
    return `${table([["tune", "name", "tags", "status", "trials", "winner", "command"], ...rows]).join("\n")}\n`;
  }
  const rows = result.items.map((r) => [
    r.id,
    r.name ?? "–",
    tagText(r.tags) || "–",
    r.status,
    r.samples_per_s === null ? "–" : formatRate(r.samples_per_s),
    r.duration_s === null ? "–" : formatSeconds(r.duration_s),
    r.command,
  ]);
  return `${table([["run", "name", "tags", "status", "samples/s", "duration", "command"], ...rows]).join("\n")}\n`;
}

/**
 * Adds `brim runs` to the program.
 *
 * @example
 * ```ts
 * registerRuns(program, processOutput);
 * ```
 */
export function registerRuns(program: Command, out: Output): void {
  program
    .command("runs")
    .summary("list the runs of the store with their names and tags; pick them by name and tag")
    .option("--name <name>", "only runs of this --name", parseRecordName)
    .option("--tag <key=value>", "only runs with this tag (repeatable: all of them)", parseTag)
    .option("--tunes", "list tunes instead of runs")
    .option("--trials", "list the trial runs of tunes too")
    .option(
      "--limit <n>",
      "list at most n (newest first)",
      (text) => {
        const n = Number(text);
        if (!Number.isInteger(n) || n < 1) throw new UsageError(`--limit must be an integer ≥ 1, got '${text}'`);
        return n;
      },
      50,
    )
    .option("--store <dir>", "run store folder (default .brim, or $BRIM_STORE)")
    .option("--json", "print the list as JSON")
    .addHelpText(
      "after",
      `
Examples:
  brim run --name bs64 --tag model=resnet50 -- python train.py
  brim runs --tag model=resnet50
  brim report bs64                      a name picks the newest run of that name`,
    )
    .action(async (options: RunsCommandOptions) => {
      const result = await runsCommand(options);
      out.stdout(options.json === true ? `${JSON.stringify(result.items, null, 2)}\n` : renderRuns(result));
    });
}
