import type { Command } from "commander";
import { resolve } from "node:path";
import { RunStore, storeRoot } from "../record/store.ts";
import { displayPath, writeReport, type ReportResult } from "../report/write.ts";
import type { Output } from "./output.ts";

/**
 * Options of `brim report` as the command line gives them.
 *
 * @example
 * ```ts
 * const options: ReportCommandOptions = { vs: "3f2a", out: "reports/run1", perfetto: true };
 * ```
 */
export interface ReportCommandOptions {
  store?: string;
  vs?: string;
  out?: string;
  perfetto?: boolean;
  png?: boolean;
  json?: boolean;
}

/**
 * `brim report`: writes the report of a run or a tune and returns what it wrote. Printing is
 * {@link printReport}'s.
 *
 * @example
 * ```ts
 * const result = await reportCommand("latest", { vs: "3f2a", perfetto: true });
 * result.files.find((f) => f.kind === "html")?.path;
 * ```
 */
export async function reportCommand(
  ref: string,
  options: ReportCommandOptions,
  env: NodeJS.ProcessEnv = process.env,
  cwd = process.cwd(),
): Promise<ReportResult> {
  const store = new RunStore(storeRoot(options.store, env, cwd));
  return writeReport(store, ref, {
    vs: options.vs,
    out: options.out === undefined ? undefined : resolve(cwd, options.out),
    perfetto: options.perfetto,
    png: options.png,
    env,
  });
}

/**
 * Prints what a report wrote, as text or JSON.
 *
 * @example
 * ```ts
 * printReport(result, {}, processOutput, process.cwd());
 * ```
 */
export function printReport(result: ReportResult, options: Pick<ReportCommandOptions, "json">, out: Output, cwd: string): void {
  if (options.json === true) {
    const { model, ...rest } = result;
    const summary =
      model.kind === "run"
        ? { findings: model.doctor.findings.map((f) => ({ id: f.id, severity: f.severity, title: f.title })), numbers: model.numbers }
        : { trials: model.trials, winner: model.trials.find((t) => t.winner) ?? null };
    out.stdout(JSON.stringify({ ...rest, comparison: model.comparison, ...summary }, null, 2) + "\n");
    return;
  }
  const lines = [`brim report · ${result.kind} ${result.id} → ${displayPath(result.dir, cwd)}`];
  for (const f of result.files) lines.push(`  ${f.kind.padEnd(8)} ${displayPath(f.path, cwd)}`);
  if (result.model.comparison !== null && result.model.comparison.speedup !== null) {
    lines.push(`  speedup  ${result.model.comparison.speedup.toFixed(2)}× (${result.model.comparison.before.label} → ${result.model.comparison.after.label})`);
  }
  if (result.png.note !== null) lines.push(`note: ${result.png.note}`);
  if (result.files.some((f) => f.kind === "trace")) lines.push("open trace.json in https://ui.perfetto.dev (Open trace file) or chrome://tracing");
  out.stdout(lines.join("\n") + "\n");
}

const EXAMPLES = `
Examples:
  $ brim report latest
  $ brim report latest --vs 20261122-093000-aa01      # before/after table, speedup
  $ brim report 20261122-101000-aa01                  # a tune: curves against micro-batch
  $ brim report latest --perfetto --out reports/run1  # + trace.json for ui.perfetto.dev

Writes report.md, report.html (self-contained, inline SVG), charts/*.svg and charts/*.png
(PNG by the built-in resvg rasterizer; it needs a font such as Debian's fonts-dejavu-core,
or $BRIM_FONT_DIRS; without one the report notes it).
`;

/**
 * Declares `brim report` on a commander program.
 *
 * @example
 * ```ts
 * registerReport(program, output);
 * ```
 */
export function registerReport(program: Command, out: Output): void {
  program
    .command("report")
    .summary("write a Markdown and HTML report of a run or a tune, with charts")
    .description("Write a report of a recorded run or tune: numbers, findings, charts (SVG and PNG), and a before/after comparison with --vs.")
    .argument("[run|tune]", "run or tune id, a unique part of one, or 'latest' (runs first)", "latest")
    .option("--vs <run>", "compare with this run (the 'before')")
    .option("--out <dir>", "output folder (default: <store>/reports/<id>)")
    .option("--perfetto", "also export the timeline as trace.json for Perfetto")
    .option("--no-png", "skip the PNG copies of the charts")
    .option("--store <dir>", "run store (default: $BRIM_STORE or ./.brim)")
    .option("--json", "print what was written as JSON")
    .addHelpText("after", EXAMPLES)
    .action(async (ref: string, options: ReportCommandOptions) => {
      printReport(await reportCommand(ref, options), options, out, process.cwd());
    });
}
