// brim completion: scripts generated from the command tree. bash's is loaded into a real bash and
// asked to complete; zsh's and fish's are checked for every command and option (and parsed by zsh /
// fish where those shells are installed).
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";

async function brim(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await main(args, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
  return { code, stdout, stderr };
}

const COMMANDS = ["plan", "detect", "run", "tune", "apply", "doctor", "report", "dashboard", "completion"];
const have = (shell: string): boolean => spawnSync("sh", ["-c", `command -v ${shell}`]).status === 0;

function complete(script: string, words: string[]): string[] {
  const line = `COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _brim_complete; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const r = spawnSync("bash", ["--norc", "-c", `${script}\n${line}`], { encoding: "utf8" });
  expect(r.stderr).toBe("");
  return r.stdout.split("\n").filter((w) => w !== "");
}

describe("brim completion", () => {
  it("bash: completes commands and each command's options in a real bash", async () => {
    const { code, stdout } = await brim(["completion", "bash"]);
    expect(code).toBe(0);
    expect(complete(stdout, ["brim", ""])).toEqual(expect.arrayContaining(COMMANDS));
    expect(complete(stdout, ["brim", "tu"])).toEqual(["tune"]);
    expect(complete(stdout, ["brim", "run", "--ca"])).toEqual(["--cap"]);
    expect(complete(stdout, ["brim", "run", "--prom"])).toEqual(["--prometheus", "--prometheus-token", "--prometheus-grace"]);
    expect(complete(stdout, ["brim", "report", "--"])).toEqual(expect.arrayContaining(["--vs", "--no-png", "--help"]));
    // after -- the words are the job's: brim offers nothing of its own
    expect(complete(stdout, ["brim", "run", "--", "python", "--ca"])).toEqual([]);
  });

  it("zsh and fish: every command and its options are in the script", async () => {
    const zsh = (await brim(["completion", "zsh"])).stdout;
    const fish = (await brim(["completion", "fish"])).stdout;
    expect(zsh.startsWith("#compdef brim\n")).toBe(true);
    for (const c of COMMANDS) {
      expect(zsh).toMatch(new RegExp(`^    '${c}:`, "m"));
      expect(fish).toContain(`-a ${c} -d `);
    }
    expect(zsh).toContain("'--cap[memory cap for the whole process tree");
    expect(fish).toMatch(/__fish_seen_subcommand_from run' -l cap -r -F -d /);
    if (have("zsh")) expect(spawnSync("zsh", ["-n", "-c", zsh]).status).toBe(0);
    if (have("fish")) expect(spawnSync("fish", ["--no-execute", "-c", fish]).status).toBe(0);
  });

  it("refuses another shell with one line and exit 2", async () => {
    const r = await brim(["completion", "tcsh"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("brim: command-argument value 'tcsh' is invalid for argument 'shell'. Allowed choices are bash, zsh, fish.\n");
  });
});
