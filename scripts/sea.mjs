#!/usr/bin/env node
// Makes one file that runs brim on a Linux x64 host with no Node: `npm run sea` writes
// dist-sea/brim-linux-x64, a POSIX shell script followed by two xz payloads (this machine's Node, and
// the portable brim that scripts/bundle.mjs makes: dist/, the SDK, the examples, the run-time
// node_modules with their linux-x64 native parts). On first run it unpacks both into
// ${BRIM_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/brim-gpu}/<content hash>/ (atomically: a temporary
// folder renamed into place) and from then on just execs that Node on brim. It needs sh, xz and
// tar on the host, which every mainstream distribution has.
//
// Why not Node's single executable applications (postject)? A SEA blob holds one CommonJS script:
// brim is ESM and loads native addons (koffi for NVML, resvg, node-pty) that cannot run from
// inside the executable, so they would have to be extracted at run time anyway.
//
// Options: --out <file> (default dist-sea/brim-linux-x64), --work <dir> (the bundle's folder,
// default .device), --xz-level <0-9> (default 6; the Node
// part is reused from the bundle's cache when the level matches), --no-build.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const MiB = 2 ** 20;

function parseArgs(argv) {
  const opts = { out: join(ROOT, "dist-sea", "brim-linux-x64"), work: join(ROOT, ".device"), xzLevel: 6, build: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--out") opts.out = resolve(argv[++i] ?? "");
    else if (a === "--work") opts.work = resolve(argv[++i] ?? "");
    else if (a === "--xz-level") opts.xzLevel = Number(argv[++i]);
    else if (a === "--no-build") opts.build = false;
    else throw new Error(`unknown option ${a}`);
  }
  if (!Number.isInteger(opts.xzLevel) || opts.xzLevel < 0 || opts.xzLevel > 9) throw new Error("--xz-level: an integer 0..9");
  return opts;
}

function run(cmd, args, opts = {}) {
  const res = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 64 * MiB, ...opts });
  if (res.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed: ${(res.stderr || res.stdout || String(res.error)).trim().split("\n").pop()}`);
  return res.stdout;
}

// The stub: sizes are fixed-width so the header's own length does not depend on them.
function stub({ version, nodeVersion, hash, headerBytes, nodeBytes, brimBytes }) {
  // spaces, not zeros: a leading 0 would make $(( )) read the number as octal
  const pad = (n) => String(n).padStart(12, " ");
  return `#!/bin/sh
# brim ${version} for Linux x64, one file: Node ${nodeVersion} and brim, xz-compressed after this script.
# Made by scripts/sea.mjs (npm run sea). First run unpacks to $BRIM_CACHE_DIR (default ~/.cache/brim-gpu).
set -eu
self="$0"
case "$self" in */*) ;; *) self=$(command -v -- "$self") ;; esac
base="\${BRIM_CACHE_DIR:-\${XDG_CACHE_HOME:-\${HOME:-/tmp}/.cache}/brim-gpu}"
dir="$base/${hash}"
if [ ! -f "$dir/.complete" ]; then
  for tool in xz tar tail head mktemp; do
    command -v "$tool" >/dev/null 2>&1 || { echo "brim: needs '$tool' to unpack itself on first run" >&2; exit 1; }
  done
  mkdir -p "$base"
  tmp=$(mktemp -d "$base/.unpack.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  tail -c +$((${pad(headerBytes)} + 1)) "$self" | head -c $((${pad(nodeBytes)})) | xz -dc > "$tmp/node"
  chmod 755 "$tmp/node"
  tail -c +$((${pad(headerBytes)} + ${pad(nodeBytes)} + 1)) "$self" | head -c $((${pad(brimBytes)})) | xz -dc | tar -x -C "$tmp"
  : > "$tmp/.complete"
  if ! mv "$tmp" "$dir" 2>/dev/null; then rm -rf "$tmp"; fi
  trap - EXIT
  [ -f "$dir/.complete" ] || { echo "brim: could not unpack into $dir" >&2; exit 1; }
fi
exec "$dir/node" "$dir/brim/bin/brim.js" "$@"
`;
}

function main() {
  if (process.platform !== "linux" || process.arch !== "x64") throw new Error(`makes a Linux x64 file; this is ${process.platform} ${process.arch}`);
  const opts = parseArgs(process.argv.slice(2));
  const work = opts.work;
  run(process.execPath, [join(ROOT, "scripts", "bundle.mjs"), "--out", work, "--xz-level", String(opts.xzLevel), ...(opts.build ? [] : ["--no-build"])], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit"],
  });
  const manifest = JSON.parse(readFileSync(join(work, "MANIFEST.json"), "utf8"));
  const nodeXz = join(work, "node.xz");

  const brimXz = join(work, "brim.tar.xz");
  const fd = openSync(brimXz, "w");
  try {
    const tar = spawnSync("sh", ["-c", `tar -C "$1" -cf - --owner=0 --group=0 --numeric-owner brim | xz -T2 -${opts.xzLevel} -c`, "sh", work], {
      stdio: ["ignore", fd, "pipe"],
    });
    if (tar.status !== 0) throw new Error(`tar | xz failed: ${tar.stderr?.toString().trim()}`);
  } finally {
    closeSync(fd);
  }

  const hash = createHash("sha256");
  hash.update(readFileSync(nodeXz));
  hash.update(readFileSync(brimXz));
  const id = `${manifest.brim_version}-${hash.digest("hex").slice(0, 16)}`;
  const sizes = { nodeBytes: statSync(nodeXz).size, brimBytes: statSync(brimXz).size };
  const probe = stub({ version: manifest.brim_version, nodeVersion: manifest.node.version, hash: id, headerBytes: 0, ...sizes });
  const header = stub({ version: manifest.brim_version, nodeVersion: manifest.node.version, hash: id, headerBytes: Buffer.byteLength(probe), ...sizes });
  if (Buffer.byteLength(header) !== Buffer.byteLength(probe)) throw new Error("stub length changed with its sizes");

  mkdirSync(dirname(opts.out), { recursive: true });
  const part = `${opts.out}.part`;
  const out = openSync(part, "w", 0o755);
  try {
    writeSync(out, header);
    writeSync(out, readFileSync(nodeXz));
    writeSync(out, readFileSync(brimXz));
  } finally {
    closeSync(out);
  }
  chmodSync(part, 0o755);
  renameSync(part, opts.out);
  rmSync(brimXz, { force: true });
  console.log(
    `sea: ${relative(process.cwd(), opts.out)} — brim ${manifest.brim_version} with Node ${manifest.node.version}, ${(statSync(opts.out).size / MiB).toFixed(1)} MiB (node ${(sizes.nodeBytes / MiB).toFixed(1)} MiB, brim ${(sizes.brimBytes / MiB).toFixed(1)} MiB, xz -${opts.xzLevel})`,
  );
}

try {
  main();
} catch (error) {
  console.error(`sea: ${error.message}`);
  process.exit(1);
}
