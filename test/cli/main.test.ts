import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { COMMAND_MODULES, main } from "../../src/cli/main.ts";

const quiet = { stdout: (): void => {}, stderr: (): void => {} };

async function run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await main(argv, { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t) });
  return { code, stdout, stderr };
}

describe("the CLI loads only the command it runs", () => {
  it("names each module's commands as the module registers them, in the order help lists them", async () => {
    for (const [names, load] of COMMAND_MODULES) {
      const program = new Command("brim").enablePositionalOptions();
      (await load())(program, quiet, () => {});
      expect(program.commands.map((command) => command.name())).toEqual(names);
    }
  });

  it("brim --help lists every command; brim tune --help is tune's own help", async () => {
    const all = await run(["--help"]);
    expect(all.code).toBe(0);
    const listed = [...all.stdout.matchAll(/^ {2}(\w+)/gm)].map((match) => match[1]);
    expect(listed.filter((name) => name !== "help")).toEqual(COMMAND_MODULES.flatMap(([names]) => names));
    const tune = await run(["tune", "--help"]);
    expect(tune.code).toBe(0);
    expect(tune.stdout).toContain("Usage: brim tune");
  });

  it("brim --version prints the version with no command loaded", async () => {
    const version = await run(["--version"]);
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("an unknown command is refused in one line with exit 2, as before", async () => {
    const wrong = await run(["tuen"]);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(/^brim: unknown command 'tuen'/);
    expect(wrong.stderr).toContain("tune");
  });
});
