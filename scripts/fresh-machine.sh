#!/usr/bin/env bash
# The README's two commands as a newcomer meets them: a fresh clone of the repository (its committed
# HEAD, or --ref), the commands read from the README's first ```sh block of that clone (so this stays
# true when the README changes), each run as written, in the clone's root, with no stdin, with CI,
# every BRIM_* variable and any virtualenv of the caller unset, and every cache a build or a test could
# find warm pointed at new, empty folders (npm's, pip's, ~/.cache with the torch extensions DeepSpeed
# builds, TorchInductor's: a fresh machine has none), while one core is kept busy by another process
# beside them. The machine's own configuration (certificates, proxies, ~/.npmrc) is kept. Reports each
# command's exit code and wall time, and the closing "N passed, N failed" line of the one that prints it.
#
#   scripts/fresh-machine.sh [--repo PATH] [--ref REF] [--first-only] [--dry-run] [--keep] [--warm-caches] [--no-busy] [--record FILE]
#
#   --repo PATH    the repository to clone (default: the one this script is in)
#   --ref REF      what to check out (default: its HEAD)
#   --first-only   run the first command only
#   --dry-run      clone and print what would run, run nothing
#   --keep         keep the clone (default: removed at the end; the logs are always kept)
#   --warm-caches  use this user's caches instead of empty ones
#   --no-busy      no busy process beside the commands
#   --record FILE  also write what it found as JSON (bench/results/fresh-machine.json is the committed one):
#                  each command's exit code, wall time and closing line, and the tune's winner lines
#
# Exit status: 0 when every command that ran exited 0, 1 otherwise, 2 for bad arguments.
# System packages (apt) are the machine's: a set-up that installs them does so once for every run.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
ref=HEAD
first_only=0
dry_run=0
keep=0
warm_caches=0
busy=1
record=""
while [ $# -gt 0 ]; do
  case "$1" in
    --repo) repo="${2:?--repo needs a path}"; shift 2 ;;
    --ref) ref="${2:?--ref needs a ref}"; shift 2 ;;
    --first-only) first_only=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    --keep) keep=1; shift ;;
    --warm-caches) warm_caches=1; shift ;;
    --no-busy) busy=0; shift ;;
    --record) record="${2:?--record needs a file}"; shift 2 ;;
    -h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fresh-machine: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

work="$(mktemp -d "${TMPDIR:-/tmp}/brim-fresh-XXXXXX")"
clone="$work/brim"
logs="$work/logs"
caches="$work/caches"
mkdir -p "$logs" "$caches"
busy_pid=""
cleanup() {
  if [ -n "$busy_pid" ]; then kill "$busy_pid" 2>/dev/null || true; wait "$busy_pid" 2>/dev/null || true; fi
  if [ "$keep" -eq 0 ]; then rm -rf "$clone" "$caches"; [ "$dry_run" -eq 1 ] && rm -rf "$work"; fi
  return 0
}
trap cleanup EXIT
git clone --quiet --no-hardlinks "$repo" "$clone"
git -C "$clone" checkout --quiet --detach "$ref"
echo "fresh-machine: $repo at $(git -C "$clone" rev-parse --short HEAD) cloned into $clone"

# the README's first ```sh block: one command a line (blank lines and comments left out)
mapfile -t commands < <(awk '/^```sh[[:space:]]*$/ && !seen { inside = 1; seen = 1; next } inside && /^```/ { exit } inside && NF && $1 !~ /^#/ { print }' "$clone/README.md")
if [ "${#commands[@]}" -eq 0 ]; then
  echo "fresh-machine: no command in the first \`\`\`sh block of README.md" >&2
  exit 1
fi
[ "$first_only" -eq 1 ] && commands=("${commands[0]}")

# the environment of a newcomer's shell: no CI, no BRIM_*, no virtualenv of the caller (its bin left
# out of PATH too), and empty caches unless --warm-caches
run_env=(env -u CI -u VIRTUAL_ENV -u PYTHONPATH -u PYTHONHOME)
while IFS='=' read -r name _; do
  case "$name" in BRIM_*) run_env+=(-u "$name") ;; esac
done < <(env)
path="$PATH"
[ -n "${VIRTUAL_ENV:-}" ] && path="$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$VIRTUAL_ENV/bin" | paste -sd: -)"
[ "$warm_caches" -eq 0 ] && run_env+=(-u TORCH_EXTENSIONS_DIR) # options before the assignments
run_env+=("PATH=$path")
if [ "$warm_caches" -eq 0 ]; then
  mkdir -p "$caches/xdg" "$caches/npm" "$caches/inductor"
  run_env+=("XDG_CACHE_HOME=$caches/xdg" "PIP_CACHE_DIR=$caches/xdg/pip" "npm_config_cache=$caches/npm" "TORCHINDUCTOR_CACHE_DIR=$caches/inductor")
fi
# the machine's own package set-up stays, as a new machine of this kind has it: the environment and the
# home folder are the caller's, so PIP_* and pip.conf (where pip finds packages), ~/.npmrc and the
# certificates are kept; only the caches above start empty

if [ "$dry_run" -eq 1 ]; then
  for i in "${!commands[@]}"; do echo "fresh-machine: would run command $((i + 1)) in $clone: ${commands[$i]}"; done
  echo "fresh-machine: caches $([ "$warm_caches" -eq 1 ] && echo "this user's (warm)" || echo "empty, under $caches"), busy core $([ "$busy" -eq 1 ] && echo yes || echo no)"
  exit 0
fi

if [ "$busy" -eq 1 ]; then
  # another process keeps one core busy beside the commands, as a browser or a call would: in a
  # session of its own, as other work on a user's machine is (the kernel's autogroup scheduling
  # weighs sessions, not processes)
  setsid yes >/dev/null &
  busy_pid=$!
  echo "fresh-machine: one core kept busy beside the commands (pid $busy_pid)"
fi

status=0
summary=()
walls=()
codes=()
for i in "${!commands[@]}"; do
  n=$((i + 1))
  log="$logs/command-$n.log"
  echo "fresh-machine: command $n: ${commands[$i]}"
  start=$(date +%s%N)
  set +e
  (cd "$clone" && "${run_env[@]}" bash -c "${commands[$i]}" </dev/null 2>&1) | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  wall=$((($(date +%s%N) - start) / 1000000000))
  closing=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1 || true)
  summary+=("command $n: exit $rc in $wall s${closing:+, closing line: $closing} (log $log)")
  walls+=("$wall")
  codes+=("$rc")
  [ "$rc" -eq 0 ] || status=1
done

echo "fresh-machine: $(nproc) cores, $([ "$busy" -eq 1 ] && echo "one kept busy" || echo "none kept busy"), caches $([ "$warm_caches" -eq 1 ] && echo "warm" || echo "empty at the start")"
for line in "${summary[@]}"; do echo "fresh-machine: $line"; done
if [ -n "$record" ]; then
  node - "$record" "$logs" "$(git -C "$clone" rev-parse --short HEAD)" "$busy" "$warm_caches" "${walls[@]}" -- "${codes[@]}" -- "${commands[@]}" <<'NODE'
const { readFileSync, writeFileSync } = require("node:fs");
const os = require("node:os");
const [file, logs, commit, busy, warm, ...rest] = process.argv.slice(2);
const cut = rest.indexOf("--");
const walls = rest.slice(0, cut).map(Number);
const after = rest.slice(cut + 1);
const cut2 = after.indexOf("--");
const codes = after.slice(0, cut2).map(Number);
const commands = after.slice(cut2 + 1);
const rounds = commands.map((command, i) => {
  const log = readFileSync(`${logs}/command-${i + 1}.log`, "utf8").split("\n");
  const pick = (re) => log.filter((l) => re.test(l)).map((l) => l.trim());
  return {
    command,
    exit_code: codes[i],
    wall_s: walls[i],
    closing_line: pick(/^\d+ passed, \d+ failed$/).at(-1) ?? null,
    tune_lines: pick(/^(winner:|no winner:|  interleaved A\/B|first-run: training Python)|^\s*[-+] {2}\S.*:/),
  };
});
const report = {
  command: "bash scripts/fresh-machine.sh --record " + file,
  commit,
  measured_at: new Date().toISOString(),
  machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, node: process.version, load_1m_at_end: Number(os.loadavg()[0].toFixed(2)) },
  beside: busy === "1" ? "one core kept busy by another process in its own session (setsid yes)" : "nothing started beside the commands",
  caches: warm === "1" ? "this user's (warm)" : "empty at the start",
  commands: rounds,
};
writeFileSync(file, JSON.stringify(report, null, 2) + "\n");
console.log(`fresh-machine: wrote ${file}`);
NODE
fi
exit "$status"
