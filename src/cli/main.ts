import { Command, CommanderError } from "commander";
import { isBrimError } from "../errors/index.ts";
import { processOutput, type Output } from "./output.ts";
import { BRIM_VERSION as version } from "../version.ts";

type Register = (program: Command, out: Output, setExitCode: (code: number) => void) => void;

/**
 * Each command's module, in the order `brim --help` lists them, loaded only when needed: a command
 * line that names one loads that one (brim runs in a few hundred milliseconds less: every trial's
 * `brim` and every shell completion pays it); help, completion and anything unknown load all.
 */
export const COMMAND_MODULES: readonly (readonly [names: readonly string[], load: () => Promise<Register>])[] = [
  [["plan"], async () => (await import("./plan.ts")).registerPlan],
  [["detect"], async () => (await import("./detect.ts")).registerDetect],
  [["run"], async () => (await import("./run.ts")).registerRun],
  [["tune", "apply"], async () => (await import("./tune.ts")).registerTune],
  [["doctor"], async () => (await import("./doctor.ts")).registerDoctor],
  [["report"], async () => (await import("./report.ts")).registerReport],
  [["runs"], async () => (await import("./runs.ts")).registerRuns],
  [["dashboard"], async () => (await import("./dashboard.ts")).registerDashboard],
  [["completion"], async () => (await import("./completion.ts")).registerCompletion],
];

/** The modules a command line needs: the one its first word names, none for the version, else all. */
function modulesFor(argv: readonly string[]): (typeof COMMAND_MODULES)[number][] {
  if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) return [];
  const named = COMMAND_MODULES.find(([names]) => names.includes(argv[0] ?? ""));
  return named === undefined || named[0].includes("completion") ? [...COMMAND_MODULES] : [named];
}

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
  for (const register of await Promise.all(modulesFor(argv).map(([, load]) => load()))) register(program, out, setExitCode);
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
