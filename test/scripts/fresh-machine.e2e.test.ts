import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

// scripts/fresh-machine.sh on a small repository of its own: a README whose first ```sh block holds two
// cheap commands stands in for brim's (the real run, set-up and the whole suite, is the lead's proof).
const SCRIPT = resolve(import.meta.dirname, "..", "..", "scripts", "fresh-machine.sh");
const root = mkdtempSync(join(tmpdir(), "brim-fresh-test-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function repoWith(readme: string): string {
  const repo = join(root, `repo-${Math.random().toString(36).slice(2, 8)}`);
  const git = (...args: string[]): void => {
    const r = spawnSync("git", ["-C", repo, ...args], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
  };
  spawnSync("mkdir", ["-p", repo]);
  git("init", "-q");
  writeFileSync(join(repo, "README.md"), readme);
  git("add", "README.md");
  git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "readme");
  return repo;
}

const fresh = (repo: string, ...args: string[]) =>
  spawnSync("bash", [SCRIPT, "--repo", repo, ...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, CI: "1", BRIM_REQUIRE_FRAMEWORKS: "1", BRIM_TEST_PYTHON: "/nonexistent" },
    timeout: scaled(60_000),
  });

describe("scripts/fresh-machine.sh", () => {
  // the first command checks what a newcomer's shell has: no CI, no BRIM_*, empty caches, no stdin
  const readme = [
    "# demo",
    "",
    "```sh",
    'test -z "${CI:-}" && test -z "${BRIM_REQUIRE_FRAMEWORKS:-}" && test -z "$(ls -A "$XDG_CACHE_HOME")" && test -z "$(ls -A "$npm_config_cache")" && ! read -r line && test -f README.md && echo first ran',
    "echo '7 passed, 1 failed'; exit 1",
    "```",
    "",
    "```sh",
    "echo never",
    "```",
  ].join("\n");

  it("runs the README's first ```sh block as written in a fresh clone, and reports exit codes, times and the closing line", () => {
    const r = fresh(repoWith(readme));
    expect(r.status, r.stdout + r.stderr).toBe(1);
    expect(r.stdout).toMatch(/^first ran$/m);
    expect(r.stdout).not.toContain("never");
    expect(r.stdout).toMatch(/one core kept busy beside the commands \(pid \d+\)/);
    expect(r.stdout).toMatch(/^fresh-machine: command 1: exit 0 in \d+ s \(log .*command-1\.log\)$/m);
    expect(r.stdout).toMatch(/^fresh-machine: command 2: exit 1 in \d+ s, closing line: 7 passed, 1 failed \(log .*command-2\.log\)$/m);
    // the busy process is gone and the clone removed; the logs stay
    const pid = /\(pid (\d+)\)/.exec(r.stdout)?.[1];
    expect(existsSync(`/proc/${pid}`)).toBe(false);
    const clone = /cloned into (\S+)/.exec(r.stdout)?.[1] ?? "";
    expect(existsSync(clone)).toBe(false);
    expect(existsSync(/\(log (\S+command-1\.log)\)/.exec(r.stdout)?.[1] ?? "")).toBe(true);
    rmSync(resolve(clone, ".."), { recursive: true, force: true });
  });

  it("--first-only runs the first command alone; --dry-run prints both and runs none", () => {
    const repo = repoWith(readme);
    const first = fresh(repo, "--first-only", "--no-busy");
    expect(first.status, first.stdout + first.stderr).toBe(0);
    expect(first.stdout).not.toMatch(/command 2/);
    const dry = fresh(repo, "--dry-run");
    expect(dry.status).toBe(0);
    expect(dry.stdout).toMatch(/would run command 1 in \S+: test -z/);
    expect(dry.stdout).toMatch(/would run command 2 in \S+: echo '7 passed, 1 failed'; exit 1/);
    expect(dry.stdout).not.toMatch(/^first ran$/m);
    for (const out of [first.stdout, dry.stdout]) rmSync(resolve(/cloned into (\S+)/.exec(out)?.[1] ?? "/nonexistent", ".."), { recursive: true, force: true });
  });

  it("refuses an unknown argument in one line, exit 2", () => {
    const r = spawnSync("bash", [SCRIPT, "--bogus"], { encoding: "utf8" });
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split("\n")).toEqual(["fresh-machine: unknown argument --bogus (see --help)"]);
  });
});
