// The published package: `npm pack` makes brim-gpu-<version>.tgz; installed into an empty project it
// gives the `brim` command, and `npx brim` / `npx brim-gpu` run it with no network.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

const root = new URL("../../", import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { name: string; version: string; bin: Record<string, string> };
const tmp = mkdtempSync(join(tmpdir(), "brim-pack-test-"));
const npm = (args: string[], cwd: string) => spawnSync("npm", args, { cwd, encoding: "utf8", env: { ...process.env, npm_config_update_notifier: "false" } });
let files: string[] = [];

beforeAll(() => {
  if (!existsSync(join(root, "dist", "cli", "main.js")))
    execFileSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"], { cwd: root });
  const packed = npm(["pack", "--ignore-scripts", "--json", "--pack-destination", tmp], root);
  expect(packed.status, packed.stderr).toBe(0);
  files = (JSON.parse(packed.stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
  writeFileSync(join(tmp, "package.json"), JSON.stringify({ name: "brim-pack-test", version: "1.0.0", private: true }));
  const installed = npm(["install", "--prefer-offline", "--no-audit", "--no-fund", `./${pkg.name}-${pkg.version}.tgz`], tmp);
  expect(installed.status, installed.stderr).toBe(0);
}, scaled(120_000));

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("npm pack", () => {
  it("is brim-gpu with the brim command, the built CLI, the SDK and the examples, and no tests or build leftovers", () => {
    expect(pkg.name).toBe("brim-gpu");
    expect(pkg.bin).toEqual({ brim: "./bin/brim.js" });
    expect(files).toContain("bin/brim.js");
    expect(files).toContain("dist/cli/main.js");
    expect(files).toContain("python/brim/__init__.py");
    expect(files).toContain("examples/nbeats/train.py");
    expect(files.filter((f) => /^python\/tests\/|__pycache__|\.pyc$|\.map$|egg-info|\.brim-trial-/.test(f))).toEqual([]);
  });

  it(
    "installs globally as the README says (npm install -g ./brim-gpu-<version>.tgz): `brim --help` runs from the prefix's bin",
    () => {
      const prefix = join(tmp, "global");
      const installed = npm(["install", "-g", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", `./${pkg.name}-${pkg.version}.tgz`], tmp);
      expect(installed.status, installed.stderr).toBe(0);
      const help = spawnSync(join(prefix, "bin", "brim"), ["--help"], { encoding: "utf8" });
      expect(help.status, help.stderr).toBe(0);
      expect(help.stdout).toMatch(/^Usage: brim /);
      const readme = readFileSync(join(root, "README.md"), "utf8");
      expect(readme).toContain(`npm install -g ./${pkg.name}-${pkg.version}.tgz`); // the README names this very file
      expect(readme).not.toMatch(/^npm install -g brim-gpu\b|^npx brim-gpu\b/m); // not published: no command that 404s
    },
    scaled(120_000),
  );

  it("installs into an empty project; npx brim and npx brim-gpu run offline", () => {
    const offline = ["--offline", "--yes"];
    const help = npm(["exec", ...offline, "--", "brim", "--help"], tmp);
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^Usage: brim /);
    for (const bin of ["brim", pkg.name]) {
      const v = npm(["exec", ...offline, "--", bin, "--version"], tmp);
      expect(v.status, v.stderr).toBe(0);
      expect(v.stdout.trim()).toBe(pkg.version);
    }
  });
});
