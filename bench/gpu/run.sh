#!/usr/bin/env bash
# Entry of brim's GPU measurement campaign: bash bench/gpu/run.sh <part> [options] (--help lists them).
# Runs from the repository root of a copy of the working tree. Needs no network: when `node` is
# missing (or older than 20) it unpacks the one in .device/node.xz (npm run bundle makes it), and it
# uses the bundled brim in .device/brim when there is one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

node_ok() {
  # BRIM_BUNDLED_NODE=1 uses the bundled Node even where one is installed (the bundle's own test)
  [ "${BRIM_BUNDLED_NODE:-0}" != 1 ] && command -v node >/dev/null 2>&1 &&
    [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -ge 20 ]
}

if ! node_ok; then
  if [ ! -f .device/node.xz ]; then
    echo "run.sh: no Node.js 20+ here and no .device/node.xz (make it with: npm run bundle)" >&2
    exit 2
  fi
  dir="${TMPDIR:-/tmp}/brim-node-$(id -u)"
  mkdir -p "$dir"
  if [ ! -x "$dir/node" ] || [ .device/node.xz -nt "$dir/node" ]; then
    if command -v xz >/dev/null 2>&1; then
      xz -dc .device/node.xz >"$dir/node.part"
    else
      # images without xz-utils still have Python's lzma
      "${PYTHON:-python3}" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' .device/node.xz "$dir/node.part"
    fi
    chmod +x "$dir/node.part"
    mv "$dir/node.part" "$dir/node"
  fi
  export PATH="$dir:$PATH"
fi

if [ -z "${BRIM_BIN:-}" ] && [ ! -f .device/brim/bin/brim.js ] && [ ! -f dist/cli/main.js ]; then
  echo "run.sh: no brim to run: neither .device/brim (npm run bundle) nor dist/ (npm run build)" >&2
  exit 2
fi

export PYTHONUNBUFFERED=1
exec node bench/gpu/campaign.mjs "$@"
