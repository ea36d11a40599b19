// scripts/sea.mjs (npm run sea): one file that runs brim on a Linux x64 host without Node. Run here
// with a PATH that holds only the tools the stub needs (sh, xz, tar, ...) and no node.
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

const root = new URL("../../", import.meta.url).pathname;
const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;
const tmp = mkdtempSync(join(tmpdir(), "brim-sea-test-"));
const bin = join(tmp, "bin");
const home = join(tmp, "home");
const file = join(tmp, "out", "brim-linux-x64");

function which(tool: string): string {
  return execFileSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).trim();
}

beforeAll(() => {
  if (!existsSync(join(root, "dist", "cli", "main.js")))
    execFileSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"], { cwd: root });
  // xz at level 6 takes minutes on this VM: level 0 unless .device already holds a node.xz to reuse
  const stamp = join(root, ".device", "node.xz.json");
  const work = join(tmp, "work");
  mkdirSync(work);
  let level = 0;
  if (existsSync(stamp) && existsSync(join(root, ".device", "node.xz"))) {
    level = (JSON.parse(readFileSync(stamp, "utf8")) as { xz_level: number }).xz_level;
    copyFileSync(stamp, join(work, "node.xz.json"));
    copyFileSync(join(root, ".device", "node.xz"), join(work, "node.xz"));
  }
  execFileSync(process.execPath, [join(root, "scripts/sea.mjs"), "--no-build", "--xz-level", String(level), "--work", work, "--out", file], {
    cwd: root,
    stdio: "pipe",
  });
  mkdirSync(bin);
  for (const tool of ["sh", "xz", "tar", "tail", "head", "mktemp", "mkdir", "mv", "rm", "chmod"]) symlinkSync(which(tool), join(bin, tool));
  copyFileSync(file, join(bin, "brim"));
  execFileSync("chmod", ["755", join(bin, "brim")]);
}, scaled(240_000));

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const env = () => ({ PATH: bin, HOME: home });

describe("npm run sea", () => {
  it("makes one executable file under 64 MiB", () => {
    expect(readFileSync(file).subarray(0, 10).toString()).toBe("#!/bin/sh\n");
    expect(readFileSync(file).length).toBeLessThan(64 * 2 ** 20);
    expect(spawnSync("sh", ["-c", "command -v node"], { env: env() }).status).not.toBe(0);
  });

  it("runs --version and detect --json with no node on PATH, unpacking once into the cache", () => {
    const v = spawnSync("brim", ["--version"], { env: env(), encoding: "utf8", cwd: tmp });
    expect(v.stderr).toBe("");
    expect(v.stdout.trim()).toBe(version);
    const cache = join(home, ".cache", "brim-gpu");
    expect(readdirSync(cache)).toEqual([expect.stringMatching(new RegExp(`^${version.replace(/\./g, "\\.")}-[0-9a-f]{16}$`))]);
    const detect = spawnSync("brim", ["detect", "--json"], { env: env(), encoding: "utf8", cwd: tmp });
    expect(detect.status, detect.stderr).toBe(0);
    expect(JSON.parse(detect.stdout)).toHaveProperty("backend");
    expect(readdirSync(cache)).toHaveLength(1);
  });

  it("says which tool it lacks, in one line, when it cannot unpack", () => {
    rmSync(join(bin, "xz"));
    const r = spawnSync("brim", ["--version"], { env: { PATH: bin, HOME: join(tmp, "home2") }, encoding: "utf8", cwd: tmp });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe("brim: needs 'xz' to unpack itself on first run\n");
  });
});
