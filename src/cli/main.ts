import { Command, CommanderError } from "commander";
import { isBrimError } from "../errors/index.ts";
import { processOutput, type Output } from "./output.ts";
import { registerPlan } from "./plan.ts";
import { registerDetect } from "./detect.ts";
import { registerRun } from "./run.ts";
import { registerTune } from "./tune.ts";
import { registerDoctor } from "./doctor.ts";
import { registerReport } from "./report.ts";
import { registerDashboard } from "./dashboard.ts";
import { registerRuns } from "./runs.ts";
import { registerCompletion } from "./completion.ts";
import { BRIM_VERSION as version } from "../version.ts";

/**
 * Runs the brim command line and returns the exit status; never exits the process itself.
 *
 * @example
 * ```ts
 * process.exitCode = await main(process.argv.slice(2));
 * ```
 */
export async function main(argv: readonly string[], out: Output = processOutput): Promise<number> {
  const program = new Command("brim")
    .description("brim fills a GPU to the brim without spilling: plan, tune and guard training jobs.")
    .version(version)
    .exitOverride()
    .showHelpAfterError(false)
    .configureOutput({
      writeOut: (text) => out.stdout(text),
      writeErr: (text) => out.stderr(text),
      outputError: () => {},
    });
  let exitCode = 0;
  const setExitCode = (code: number): void => {
    exitCode = code;
  };
  program.enablePositionalOptions();
  registerPlan(program, out);
  registerDetect(program, out);
  registerRun(program, out, setExitCode);
  registerTune(program, out, setExitCode);
  registerDoctor(program, out);
  registerReport(program, out);
  registerRuns(program, out);
  registerDashboard(program, out);
  registerCompletion(program, out);
  for (const command of program.commands) command.exitOverride();

  try {
    await program.parseAsync(argv, { from: "user" });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === "commander.helpDisplayed" || error.code === "commander.version" || error.code === "commander.help") return 0;
      out.stderr(`brim: ${error.message.replace(/^error: /, "")}\n`);
      return 2;
    }
    if (isBrimError(error)) {
      out.stderr(`brim: ${error.message}\n`);
      return error.exitCode;
    }
    const e = error instanceof Error ? error : new Error(String(error));
    out.stderr(
      `brim: internal error: ${e.message}\n${e.stack ?? ""}\nThis is a bug in brim ${version} (node ${process.version}); please report it with the command you ran.\n`,
    );
    return 70;
  }
}
