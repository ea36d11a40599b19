#!/usr/bin/env bash
# A user's first run of brim, from a fresh clone: installs only what a user needs (brim's npm
# dependencies, then the build) and, when no Python with PyTorch is found, a small venv at
# .venv-user with a pinned CPU PyTorch; then tunes the bundled cnn-lstm example whose data sits on a
# (simulated) network mount, and shows the change it would write into the example's config.
#
#   bash scripts/first-run.sh            # BRIM_PYTHON=/path/to/python picks the Python to train with
#
# Nothing in the repository is changed: the tune writes its record under .brim/ and `brim apply
# --dry-run` only prints the diff. No Debian packages, no browser, no frameworks beyond PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'first-run: %s\n' "$*"; }
die() {
  printf 'first-run: %s\n' "$*" >&2
  exit 2
}

command -v node >/dev/null || die "no node on PATH: brim needs Node.js 20.11 or newer"
node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 11) ? 0 : 1)' ||
  die "node $(node --version) is too old: brim needs Node.js 20.11 or newer"

# The Python to train with: BRIM_PYTHON, else python3 or python on PATH, when it has PyTorch, NumPy
# and PyYAML (what the example imports); else a venv of our own with those, pinned, made beside npm's
# install and the build (each waits mostly on the disk or the network).
has_torch() { "$1" -c 'import torch, numpy, yaml' >/dev/null 2>&1; }
python=""
for candidate in "${BRIM_PYTHON:-}" python3 python; do
  [ -n "$candidate" ] || continue
  if command -v "$candidate" >/dev/null && has_torch "$candidate"; then
    python=$(command -v "$candidate")
    break
  fi
done
venv_pid=""
venv_log=".venv-user.log"
if [ -z "$python" ]; then
  if [ -x .venv-user/bin/python ] && has_torch .venv-user/bin/python; then
    python=.venv-user/bin/python
  else
    base=$(command -v python3 || command -v python || true)
    [ -n "$base" ] || die "no python3 on PATH: install Python 3.9+ (or set BRIM_PYTHON to a Python with PyTorch)"
    say "no Python with PyTorch found: making .venv-user with torch==2.13.0, numpy, pyyaml (beside npm's install; its log: $venv_log)"
    # pip's own settings decide where torch comes from: on Linux the default index serves the CUDA
    # build (several GB); PIP_INDEX_URL pointed at PyTorch's CPU wheels, or BRIM_PYTHON, avoids it
    "$base" -m pip config list 2>/dev/null | grep -q 'index-url\|find-links' || [ -n "${PIP_INDEX_URL:-}${PIP_FIND_LINKS:-}" ] ||
      say "pip has no index of its own configured: it may fetch PyTorch's CUDA build (several GB); Ctrl-C and set BRIM_PYTHON to a Python with PyTorch to skip this"
    rm -rf .venv-user
    (
      "$base" -m venv .venv-user || exit 3
      .venv-user/bin/python -m pip install -q --disable-pip-version-check 'torch==2.13.0' 'numpy==2.4.6' 'PyYAML==6.0.4' || exit 4
    ) >"$venv_log" 2>&1 &
    venv_pid=$!
    trap '[ -z "$venv_pid" ] || kill "$venv_pid" 2>/dev/null' EXIT
    python=.venv-user/bin/python
  fi
fi

# brim's npm dependencies: skipped when node_modules already matches package-lock.json
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "npm ci (brim's dependencies)"
  npm ci --no-audit --no-fund --loglevel=error
fi
say "npm run build"
npm run --silent build

if [ -n "$venv_pid" ]; then
  venv_status=0
  wait "$venv_pid" || venv_status=$?
  venv_pid=""
  if [ "$venv_status" -ne 0 ]; then
    cat "$venv_log" >&2
    [ "$venv_status" -eq 3 ] && die "$base -m venv failed (Debian: apt-get install python3-venv)"
    die "pip could not install torch==2.13.0 into .venv-user (set BRIM_PYTHON to a Python that has PyTorch)"
  fi
  rm -f "$venv_log"
fi
say "training Python: $python ($("$python" -c 'import torch; print("torch", torch.__version__)'))"

cmd=(node bin/brim.js tune --max-trials 5 --steps 8 -- "$python" examples/cnn-lstm/train.py --config examples/cnn-lstm/remote.yaml)
say "${cmd[*]}"
"${cmd[@]}"
say "node bin/brim.js apply --dry-run   (the change --apply would write, with a backup; nothing is written now)"
status=0
node bin/brim.js apply --dry-run || status=$?
# 3: the tune named no winner (it said why above): nothing to show, which is not a failure of the run
[ "$status" -eq 3 ] && say "no winner this time: nothing to apply" && status=0
exit "$status"
