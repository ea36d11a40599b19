#!/usr/bin/env bash
# GPU checks of issues 22 and 26 on the device machine, beside the campaign (bench/gpu/run.sh):
#   bash bench/gpu/issue-checks.sh plan|tune|env [out-dir] [nanogpt|word-language-model]
# plan: `brim plan --json --gpu h100-sxm -- <example's own command>` for the examples whose peaks the
#       campaign's plan-accuracy part measured (bench/gpu/plan-script-check.mjs compares them, here).
# tune: `brim tune -- <a corpus script's own command, on cuda>` (nanoGPT shakespeare-char in fp32 with
#       its own flags, pytorch/examples word_language_model with --accel), each in a temporary copy.
# Needs the bundle (npm run bundle) and the host's Python with PyTorch; no network. The results are
# committed under bench/results/gpu-checks/<gpu-slug>/ (bench/results/gpu/ holds the campaign's only).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
what="${1:-env}"
out="${2:-${OUT:-bench/results/local}}/issue-checks"
mkdir -p "$out"
repo="$PWD"
py="${PYTHON:-python3}"

if ! command -v node >/dev/null 2>&1; then
  dir="${TMPDIR:-/tmp}/brim-node-$(id -u)"
  mkdir -p "$dir"
  [ -x "$dir/node" ] || { "$py" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' .device/node.xz "$dir/node" && chmod +x "$dir/node"; }
  export PATH="$dir:$PATH"
fi
brim() { node "$repo/.device/brim/bin/brim.js" "$@"; }
export PYTHONUNBUFFERED=1

env_report() {
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "brim commit: ${BRIM_COMMIT:-unknown}"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    "$py" - <<'EOF'
import importlib, sys
print("python", sys.version.split()[0])
for m in ("torch", "numpy", "torchvision", "transformers", "lightning", "accelerate", "datasets", "jax"):
    try:
        print(m, importlib.import_module(m).__version__)
    except Exception as e:  # noqa: BLE001
        print(m, "missing:", type(e).__name__)
import torch
print("cuda", torch.version.cuda, "available", torch.cuda.is_available(), "bf16", torch.cuda.is_bf16_supported())
EOF
  } >"$out/env.txt" 2>&1
  cat "$out/env.txt"
}

plan_examples() {
  mkdir -p "$out/plan"
  for name in nbeats embedder cnn-lstm lstm-transformer ppo; do
    start=$(date +%s.%N)
    brim plan --json --gpu h100-sxm -- "$py" "examples/$name/train.py" --config "examples/$name/config.yaml" \
      >"$out/plan/$name.json" 2>"$out/plan/$name.err"
    rc=$?
    echo "{\"name\":\"$name\",\"rc\":$rc,\"wall_s\":$(awk "BEGIN{print $(date +%s.%N) - $start}")}" >>"$out/plan/index.jsonl"
    echo "plan $name: rc $rc"
  done
}

tune_one() {
  # tune_one <name> <corpus dir> <max-time> <command...>
  local name="$1" dir="$2" maxTime="$3"
  shift 3
  local work
  work="$(mktemp -d)"
  cp -r "corpus/$dir/." "$work/"
  (cd "$work" && "$py" prepare.py >/dev/null)
  local start rc
  start=$(date +%s)
  (cd "$work" && BRIM_STORE="$work/.brim" brim tune --max-time "$maxTime" --name "$name" -- "$py" "$@") \
    >"$out/tune-$name.log" 2>&1
  rc=$?
  echo "tune $name: rc $rc in $(($(date +%s) - start)) s"
  mkdir -p "$out/tune-$name"
  find "$work/.brim" -name tune.json -exec cp {} "$out/tune-$name/" \;
  BRIM_STORE="$work/.brim" brim runs --json >"$out/tune-$name/runs.json" 2>/dev/null
  rm -rf "$work"
}

tune_corpus() {
  [ "${1:-all}" = word-language-model ] || tune_one nanogpt-fp32 nanogpt-shakespeare-char 150s train.py config/train_shakespeare_char.py \
    --compile=False --dtype=float32 --eval_iters=5 --log_interval=1 --batch_size=12 --max_iters=100000 --lr_decay_iters=100000
  [ "${1:-all}" = nanogpt ] || tune_one word-language-model pe-word-language-model 150s main.py --accel --epochs 6 --batch_size 20 --log-interval 5
}

case "$what" in
  env) env_report ;;
  plan) env_report >/dev/null; plan_examples ;;
  tune) env_report >/dev/null; tune_corpus "${3:-all}" ;;
  *) echo "issue-checks.sh: unknown part '$what' (env, plan, tune)" >&2; exit 2 ;;
esac
