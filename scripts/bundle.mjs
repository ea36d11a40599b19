#!/usr/bin/env node
// Makes a portable brim for a machine with no Node and no network (the GPU host of
// bench/gpu/run.sh): `npm run bundle` writes .device/ with
//   brim/      bin/, dist/ (JavaScript only), package.json, python/ (the SDK), examples/, and the
//              node_modules brim needs at run time (its dependencies' closure, trimmed of types,
//              sources and docs; koffi with its linux-x64 native part)
//   node.xz    this machine's Node binary, xz-compressed (unpacked by bench/gpu/run.sh)
//   MANIFEST.json  what is in it, sizes, versions
// Options: --out <dir> (default .device), --no-build (use dist/ as it is), --no-node, --xz-level <0-9>.
// node.xz is made again only when the Node binary or the level changed (xz is slow).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { closeSync, cpSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const MiB = 2 ** 20;
const SIZE_TARGET = 40 * MiB;

function parseArgs(argv) {
  const opts = { out: join(ROOT, ".device"), build: true, node: true, xzLevel: 6 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--out") opts.out = resolve(argv[++i] ?? "");
    else if (a === "--no-build") opts.build = false;
    else if (a === "--no-node") opts.node = false;
    else if (a === "--xz-level") opts.xzLevel = Number(argv[++i]);
    else throw new Error(`unknown option ${a}`);
  }
  if (!Number.isInteger(opts.xzLevel) || opts.xzLevel < 0 || opts.xzLevel > 9) throw new Error("--xz-level: an integer 0..9");
  return opts;
}

// Files no running brim reads: types, source maps, TypeScript and C/C++ sources, docs.
const DROP_FILE = /(\.d\.[cm]?ts|\.map|\.tsbuildinfo|\.ts|\.cc|\.hh|\.h|\.c|\.cpp|\.inc|\.md|CMakeLists\.txt)$/;
// Folders dropped anywhere (caches) and only at a package's top level (a library may keep code in dist/doc).
const DROP_DIR = new Set(["__pycache__", ".data", ".pytest_cache", ".github"]);
const DROP_TOP_DIR = new Set(["doc", "docs", "test", "tests", "__tests__", "vendor"]);

function copyTree(from, to, keep = () => true, topDirs = new Set()) {
  let bytes = 0;
  let files = 0;
  const walk = (src, dst, depth) => {
    for (const entry of readdirSync(src, { withFileTypes: true })) {
      const s = join(src, entry.name);
      const d = join(dst, entry.name);
      if (entry.isDirectory()) {
        if (DROP_DIR.has(entry.name) || (depth === 0 && topDirs.has(entry.name)) || !keep(s, true)) continue;
        walk(s, d, depth + 1);
      } else if (entry.isFile() || entry.isSymbolicLink()) {
        if (!keep(s, false)) continue;
        mkdirSync(dst, { recursive: true });
        cpSync(s, d, { dereference: true });
        bytes += statSync(d).size;
        files++;
      }
    }
  };
  walk(from, to, 0);
  return { bytes, files };
}

/** Where Node would find package `name` from `fromDir` (nested node_modules first). */
function resolvePackage(name, fromDir) {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
    if (dir === ROOT || dirname(dir) === dir) return null;
  }
}

/** The run-time dependency closure of brim: dependencies, and optional ones (node-pty, native parts) that are installed. */
function dependencyClosure() {
  const root = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  const seen = new Map();
  const visit = (name, fromDir, required) => {
    const dir = resolvePackage(name, fromDir);
    if (dir === null) {
      if (required) throw new Error(`package ${name} is not installed (run npm ci)`);
      return;
    }
    if (seen.has(dir)) return;
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    seen.set(dir, { name, version: pkg.version });
    for (const dep of Object.keys(pkg.dependencies ?? {})) visit(dep, dir, true);
    for (const dep of Object.keys(pkg.optionalDependencies ?? {})) visit(dep, dir, false);
  };
  for (const dep of Object.keys(root.dependencies ?? {})) visit(dep, ROOT, true);
  for (const dep of Object.keys(root.optionalDependencies ?? {})) visit(dep, ROOT, false);
  return seen;
}

function sha256(file) {
  const hash = createHash("sha256");
  hash.update(readFileSync(file));
  return hash.digest("hex");
}

function run(cmd, args, opts = {}) {
  const res = spawnSync(cmd, args, { encoding: "utf8", ...opts });
  if (res.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed: ${(res.stderr || res.stdout || String(res.error)).trim().split("\n").pop()}`);
  return res.stdout;
}

function compressNode(out, level) {
  const nodeBin = process.execPath;
  const stampFile = join(out, "node.xz.json");
  const target = join(out, "node.xz");
  const stamp = { node: process.version, binary_sha256: sha256(nodeBin), binary_bytes: statSync(nodeBin).size, xz_level: level };
  if (existsSync(target) && existsSync(stampFile)) {
    const old = JSON.parse(readFileSync(stampFile, "utf8"));
    if (old.binary_sha256 === stamp.binary_sha256 && old.xz_level === level) return { ...old, reused: true };
  }
  const part = `${target}.part`;
  const fd = openSync(part, "w");
  try {
    const res = spawnSync("xz", ["-T2", `-${level}`, "-c", nodeBin], { stdio: ["ignore", fd, "pipe"] });
    if (res.status !== 0) throw new Error(`xz failed: ${res.stderr?.toString().trim() || String(res.error)}`);
  } finally {
    closeSync(fd);
  }
  renameSync(part, target);
  writeFileSync(stampFile, JSON.stringify(stamp, null, 2) + "\n");
  return { ...stamp, reused: false };
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.build) run(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.build.json"], { cwd: ROOT });
  if (!existsSync(join(ROOT, "dist", "cli", "main.js"))) throw new Error("dist/ is missing: run npm run build first");
  const brim = join(opts.out, "brim");
  rmSync(brim, { recursive: true, force: true });
  mkdirSync(brim, { recursive: true });
  const parts = {};
  parts.bin = copyTree(join(ROOT, "bin"), join(brim, "bin"));
  cpSync(join(ROOT, "package.json"), join(brim, "package.json"));
  parts.dist = copyTree(join(ROOT, "dist"), join(brim, "dist"), (p, dir) => dir || /\.js$/.test(p));
  parts.python = copyTree(join(ROOT, "python"), join(brim, "python"), (p, dir) => !(dir && p.endsWith(`${sep}tests`)) && !/\.pyc$/.test(p));
  parts.examples = copyTree(join(ROOT, "examples"), join(brim, "examples"), (p, dir) => dir || !/\.brim-trial-|\.pyc$/.test(p));
  const packages = [];
  let moduleBytes = 0;
  for (const [dir, pkg] of dependencyClosure()) {
    const rel = relative(ROOT, dir);
    // koffi's loader picks the native part by platform; keep this platform's (glibc and musl)
    const copied = copyTree(
      dir,
      join(brim, rel),
      (p, isDir) => isDir || !DROP_FILE.test(p) || /(^|[/\\])(package\.json|LICEN[CS]E[^/\\]*)$/.test(p),
      DROP_TOP_DIR,
    );
    moduleBytes += copied.bytes;
    packages.push({ name: pkg.name, version: pkg.version, path: rel, bytes: copied.bytes });
  }
  parts.node_modules = { bytes: moduleBytes, files: packages.length };

  let node = null;
  if (opts.node) node = compressNode(opts.out, opts.xzLevel);

  // The bundle must run on its own: no NODE_PATH, no repository node_modules around it.
  const env = { ...process.env };
  delete env.NODE_PATH;
  const version = run(process.execPath, [join(brim, "bin", "brim.js"), "--version"], { cwd: opts.out, env }).trim();
  const koffi = run(
    process.execPath,
    [
      "-e",
      `const r = require("node:module").createRequire(process.argv[1]); process.stdout.write(String(r("koffi").version));`,
      join(brim, "dist", "devices", "nvml-koffi.js"),
    ],
    { cwd: opts.out, env },
  ).trim();

  const brimBytes = Object.values(parts).reduce((a, p) => a + p.bytes, 0);
  const nodeXzBytes = node ? statSync(join(opts.out, "node.xz")).size : 0;
  const manifest = {
    schema: "brim.device-bundle/v1",
    created_at: new Date().toISOString(),
    brim_version: version,
    koffi_version: koffi,
    commit: spawnSync("git", ["rev-parse", "HEAD"], { cwd: ROOT, encoding: "utf8" }).stdout?.trim() || null,
    node: node && { version: node.node, binary_bytes: node.binary_bytes, xz_bytes: nodeXzBytes, xz_level: node.xz_level, reused: node.reused },
    parts,
    packages,
    total_bytes: brimBytes + nodeXzBytes,
  };
  writeFileSync(join(opts.out, "MANIFEST.json"), JSON.stringify(manifest, null, 2) + "\n");
  const mib = (b) => `${(b / MiB).toFixed(1)} MiB`;
  console.log(
    `bundle: ${relative(process.cwd(), opts.out) || "."} — brim ${version} ${mib(brimBytes)} (dist ${mib(parts.dist.bytes)}, node_modules ${mib(moduleBytes)} in ${packages.length} packages, python ${mib(parts.python.bytes)}, examples ${mib(parts.examples.bytes)})` +
      (node ? `, node ${node.node} xz ${mib(nodeXzBytes)}${node.reused ? " (reused)" : ""}` : ", no node") +
      `; total ${mib(manifest.total_bytes)}`,
  );
  if (manifest.total_bytes > SIZE_TARGET) console.warn(`bundle: warning: ${mib(manifest.total_bytes)} is over the ${mib(SIZE_TARGET)} target`);
}

try {
  main();
} catch (error) {
  console.error(`bundle: ${error.message}`);
  process.exit(1);
}
