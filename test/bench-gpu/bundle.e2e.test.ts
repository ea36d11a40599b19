// scripts/bundle.mjs (npm run bundle): the .device bundle must run brim on its own, from a clean
// folder with no node_modules around it and NODE_PATH unset, with the Node it carries.
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

const root = new URL("../../", import.meta.url).pathname;
const tmp = mkdtempSync(join(tmpdir(), "brim-bundle-test-"));
const built = join(tmp, "built", ".device");
const clean = join(tmp, "clean");
const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;
const MiB = 2 ** 20;

function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.NODE_PATH;
  delete env.NODE_OPTIONS;
  return env;
}

interface Manifest {
  brim_version: string;
  koffi_version: string;
  node: { version: string; xz_bytes: number; xz_level: number };
  packages: { name: string }[];
  parts: Record<string, { bytes: number }>;
  total_bytes: number;
}

let manifest: Manifest;

beforeAll(() => {
  if (!existsSync(join(root, "dist", "cli", "main.js")))
    execFileSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"], { cwd: root });
  // xz at the default level takes minutes here: reuse the repository's node.xz when it is this Node's
  mkdirSync(built, { recursive: true });
  const level = existsSync(join(root, ".device", "node.xz.json"))
    ? (JSON.parse(readFileSync(join(root, ".device", "node.xz.json"), "utf8")) as { xz_level: number }).xz_level
    : 0;
  if (existsSync(join(root, ".device", "node.xz"))) {
    copyFileSync(join(root, ".device", "node.xz"), join(built, "node.xz"));
    copyFileSync(join(root, ".device", "node.xz.json"), join(built, "node.xz.json"));
  }
  execFileSync(process.execPath, [join(root, "scripts/bundle.mjs"), "--no-build", "--out", built, "--xz-level", String(level)], {
    cwd: root,
    env: cleanEnv(),
    stdio: "pipe",
  });
  manifest = JSON.parse(readFileSync(join(built, "MANIFEST.json"), "utf8")) as Manifest;
  // the clean copy: the bundle alone, then its Node unpacked
  cpSync(built, join(clean, ".device"), { recursive: true });
  const nodeBin = join(clean, "node");
  writeFileSync(nodeBin, execFileSync("xz", ["-dc", join(clean, ".device", "node.xz")], { maxBuffer: 512 * MiB }));
  chmodSync(nodeBin, 0o755);
}, scaled(240_000));

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("npm run bundle", () => {
  it("holds brim, its run-time packages, the SDK, the examples and an xz'd Node, under 40 MiB", () => {
    expect(manifest.brim_version).toBe(version);
    expect(manifest.node.version).toBe(process.version);
    expect(manifest.packages.map((p) => p.name).sort()).toEqual([
      "@koromix/koffi-linux-x64",
      "@lydell/node-pty",
      "@lydell/node-pty-linux-x64",
      "@resvg/resvg-js",
      "@resvg/resvg-js-linux-x64-gnu",
      "commander",
      "eslint-visitor-keys",
      "koffi",
      "toml-eslint-parser",
      "yaml",
      "zod",
    ]);
    expect(existsSync(join(built, "brim", "node_modules", "@koromix", "koffi-linux-x64", "linux_x64", "koffi.node"))).toBe(true);
    expect(existsSync(join(built, "brim", "python", "brim", "torch", "__init__.py"))).toBe(true);
    expect(existsSync(join(built, "brim", "examples", "nbeats", "train.py"))).toBe(true);
    expect(existsSync(join(built, "brim", "dist", "cli", "main.js.map"))).toBe(false);
    expect(manifest.parts.node_modules!.bytes).toBeLessThan(12 * MiB);
    if (manifest.node.xz_level >= 6) expect(manifest.total_bytes).toBeLessThan(40 * MiB);
  });

  it("runs from a clean copy with its own Node and NODE_PATH unset", () => {
    const node = join(clean, "node");
    const v = spawnSync(node, [".device/brim/bin/brim.js", "--version"], { cwd: clean, env: cleanEnv(), encoding: "utf8" });
    expect(v.stderr).toBe("");
    expect(v.stdout.trim()).toBe(version);
    const plan = spawnSync(node, [".device/brim/bin/brim.js", "plan", ".device/brim/examples/nbeats/model.yaml", "--gpu", "h100-sxm", "--json"], {
      cwd: clean,
      env: cleanEnv(),
      encoding: "utf8",
    });
    expect(plan.status).toBe(0);
    expect((JSON.parse(plan.stdout) as { memory: { peak_bytes: number } }).memory.peak_bytes).toBeGreaterThan(0);
    // koffi and its native part load from the bundle (brim reaches NVML through it)
    const koffi = spawnSync(
      node,
      [
        "-e",
        "process.stdout.write(String(require('node:module').createRequire(process.argv[1])('koffi').version))",
        join(clean, ".device/brim/dist/devices/nvml-koffi.js"),
      ],
      { cwd: clean, env: cleanEnv(), encoding: "utf8" },
    );
    expect(koffi.stdout).toBe(manifest.koffi_version);
    const detect = spawnSync(node, [".device/brim/bin/brim.js", "detect", "--json"], { cwd: clean, env: cleanEnv(), encoding: "utf8" });
    expect(detect.status).toBe(0);
    expect(JSON.parse(detect.stdout)).toHaveProperty("backend");
  });

  it("run.sh unpacks the bundled Node when it is asked to (as on a host without Node)", () => {
    cpSync(join(root, "bench", "gpu"), join(clean, "bench", "gpu"), { recursive: true });
    const nodeTmp = join(tmp, "node-tmp");
    mkdirSync(nodeTmp);
    const res = spawnSync("bash", [join(clean, "bench/gpu/run.sh"), "--help"], {
      cwd: clean,
      env: { ...cleanEnv(), BRIM_BUNDLED_NODE: "1", TMPDIR: nodeTmp },
      encoding: "utf8",
    });
    expect(res.stderr).toBe("");
    expect(res.status).toBe(0);
    expect(res.stdout).toContain("usage: bash bench/gpu/run.sh <part>");
    const uid = String(process.getuid?.() ?? 0);
    expect(existsSync(join(nodeTmp, `brim-node-${uid}`, "node"))).toBe(true);
  });
});
