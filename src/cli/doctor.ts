import type { Command } from "commander";
import { diagnose, type DoctorReport } from "../analyze/doctor/index.ts";
import { UsageError } from "../errors/index.ts";
import { RunStore, storeRoot } from "../record/store.ts";
import { loadRun } from "../record/load.ts";
import type { Output } from "./output.ts";
import { renderDoctorMarkdown, renderDoctorText } from "./render-doctor.ts";

/**
 * Options of `brim doctor` as the command line gives them.
 *
 * @example
 * ```ts
 * const options: DoctorCommandOptions = { store: ".brim", json: true };
 * ```
 */
export interface DoctorCommandOptions {
  store?: string;
  json?: boolean;
  markdown?: boolean;
}

/**
 * `brim doctor`: reads a run from the store and diagnoses it. Printing is {@link printDoctor}'s.
 *
 * @example
 * ```ts
 * const report = await doctorCommand("latest", { store: ".brim" });
 * report.findings.map((f) => f.id); // ["data_starved", "memory_unused"]
 * ```
 */
export async function doctorCommand(
  ref: string,
  options: DoctorCommandOptions,
  env: NodeJS.ProcessEnv = process.env,
  cwd = process.cwd(),
): Promise<DoctorReport> {
  const store = new RunStore(storeRoot(options.store, env, cwd));
  const { meta, timeline } = await loadRun(store, await store.resolveRun(ref));
  return diagnose(meta, timeline);
}

/**
 * Prints a doctor report as text, JSON or Markdown.
 *
 * @example
 * ```ts
 * printDoctor(report, { json: true }, processOutput);
 * ```
 */
export function printDoctor(report: DoctorReport, options: Pick<DoctorCommandOptions, "json" | "markdown">, out: Output): void {
  if (options.json === true) out.stdout(JSON.stringify(report, null, 2) + "\n");
  else if (options.markdown === true) out.stdout(renderDoctorMarkdown(report));
  else out.stdout(renderDoctorText(report));
}

const EXAMPLES = `
Examples:
  $ brim doctor latest
  $ brim doctor 3f2a --json
  $ brim doctor 20261122-101500-3f2a --store /data/brim --markdown > DOCTOR.md

Each finding names the numbers that show it, a fix in the job's own settings, how sure it is,
and where a knob can verify the fix, the brim tune command that does. Thresholds: docs/doctor.md.
`;

/**
 * Declares `brim doctor` on a commander program.
 *
 * @example
 * ```ts
 * registerDoctor(program, output);
 * ```
 */
export function registerDoctor(program: Command, out: Output): void {
  program
    .command("doctor")
    .summary("explain why a recorded run is slow, and what to change")
    .description("Diagnose a recorded run: data starvation, launch-bound steps, unused memory, precision, PCIe traffic, clocks, GPU contexts.")
    .argument("[run]", "run id, a unique part of one, or 'latest'", "latest")
    .option("--store <dir>", "run store (default: $BRIM_STORE or ./.brim)")
    .option("--json", "print the report as JSON")
    .option("--markdown", "print the report as Markdown")
    .addHelpText("after", EXAMPLES)
    .action(async (ref: string, options: DoctorCommandOptions) => {
      if (options.json === true && options.markdown === true) throw new UsageError("choose one of --json and --markdown");
      printDoctor(await doctorCommand(ref, options), options, out);
    });
}
