#!/usr/bin/env node
// `brim tune -- <the script's own command line>` on each real public training script of corpus/ (issue 22),
// plus `brim run --steps N` on each as a sanity column. Every entry runs in a temporary copy of its folder
// (the pinned files stay untouched), after its prepare step; per script it records the knobs brim found
// and where, the trials, the winner and its confirmed speedup (as tune.json in the run store has them),
// or the "no gain" / "no winner" / failure with its reason, and the wall time.
// Usage (after `npm run build`):
//   node bench/tune-corpus.bench.mjs [--only a,b] [--fast] [--tune-time 150] [--run-timeout 150] [--run-only] [--merge] [--out bench/results/tune-corpus.json] [--help]
// --merge keeps the entries of an existing record that this call does not run (each entry says which
// call measured it: its `measured_by`, an index into `calls`).
// Pythons: BRIM_BENCH_PYTHON (default the repository's .venv/bin/python, made by bash .ci/venv) for entries on the base packages;
// BRIM_BENCH_EXTRA_PYTHON (default .venv-corpus/bin/python) for entries that need more, BRIM_BENCH_VISION_PYTHON
// (default .venv-vision/bin/python: torch 2.14.1 + torchvision 0.29.1) for those that need torchvision (docs/corpus.md;
// accelerate-mnist also needs accelerate and scikit-learn there).
// An entry whose python or packages are missing is recorded as skipped, with the reason.
// An entry with `storage` reads its data through bench/io/latencyfs.py (a FUSE mount whose every file open
// waits `latency_ms`, as on a network file system or an object-store mount): BRIM_BENCH_FUSE_PYTHON (default
// the entry's python) needs fusepy, the host /dev/fuse and libfuse2; without them the entry is skipped.
import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join, resolve } from "node:path";

const repo = resolve(import.meta.dirname, "..");
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1] : fallback;
};
const flag = (name) => args.includes(`--${name}`);
if (flag("help") || args.includes("-h")) {
  // the usage lines of this file's header, not a run (a run rewrites the record)
  const usage = readFileSync(new URL(import.meta.url), "utf8")
    .split("\n")
    .slice(1)
    .filter((line) => line.startsWith("//"))
    .map((line) => line.replace(/^\/\/ ?/, ""));
  console.log(usage.join("\n"));
  process.exit(0);
}
const corpus = JSON.parse(readFileSync(join(repo, "corpus", "corpus.json"), "utf8"));
const out = resolve(option("out", join(repo, "bench", "results", "tune-corpus.json")));
const tuneTime = Number(option("tune-time", "150"));
const runTimeout = Number(option("run-timeout", "150"));
const PYTHONS = {
  main: process.env.BRIM_BENCH_PYTHON ?? join(repo, ".venv", "bin", "python"),
  extra: process.env.BRIM_BENCH_EXTRA_PYTHON ?? join(repo, ".venv-corpus", "bin", "python"),
  vision: process.env.BRIM_BENCH_VISION_PYTHON ?? join(repo, ".venv-vision", "bin", "python"),
};
const MiB = 2 ** 20;

const only = option("only", null)?.split(",");
const entries = corpus.entries.filter((e) => (only ? only.includes(e.name) : flag("fast") ? e.fast : true));
if (only)
  for (const n of only)
    if (!corpus.entries.some((e) => e.name === n)) throw new Error(`no corpus entry ${n}; known: ${corpus.entries.map((e) => e.name).join(", ")}`);

const git = (a) => spawnSync("git", a, { cwd: repo, encoding: "utf8" }).stdout?.trim() ?? "";
const lastLines = (text, n = 12) =>
  text
    .split("\n")
    .map((l) => l.replace(/\r/g, "").trimEnd())
    .filter((l) => l !== "")
    .slice(-n);

/** What an entry's python lacks, or null when it has what the entry needs. */
function missing(python, entry) {
  if (!existsSync(python)) return `no python at ${python}`;
  const mods = ["torch", ...(entry.requires ?? [])];
  const r = spawnSync(python, ["-c", `import importlib.util as u, sys; m=[x for x in sys.argv[1:] if u.find_spec(x) is None]; print(",".join(m))`, ...mods], {
    encoding: "utf8",
  });
  const lacks = r.stdout.trim();
  return lacks ? `${python} lacks ${lacks}` : null;
}

function brim(argv, cwd, env, timeoutS) {
  const started = Date.now();
  const r = spawnSync("nice", ["-n", "5", process.execPath, join(repo, "bin", "brim.js"), ...argv], {
    cwd,
    env: { ...process.env, ...env },
    encoding: "utf8",
    maxBuffer: 64 * MiB,
    timeout: timeoutS * 1000,
    killSignal: "SIGINT",
  });
  return { status: r.status, signal: r.signal, output: `${r.stdout ?? ""}\n${r.stderr ?? ""}`, wall_s: Number(((Date.now() - started) / 1000).toFixed(1)) };
}

const readJson = (file) => {
  try {
    return JSON.parse(readFileSync(file, "utf8"));
  } catch {
    return null;
  }
};
const newest = (dir) => (existsSync(dir) ? readdirSync(dir).sort().at(-1) : undefined);

/** The job's own printed step time (median of its lines), where the script prints one. */
function ownFigure(entry, text) {
  if (!entry.own_figure) return null;
  const re = new RegExp(entry.own_figure.pattern, "g");
  const xs = [...text.matchAll(re)].map((m) => Number(m[1]) * (entry.own_figure.scale ?? 1)).filter(Number.isFinite); // in ms
  if (xs.length === 0) return { unit: entry.own_figure.unit, all: [], median: null };
  const rest = xs.length > 1 ? xs.slice(1) : xs; // the first line holds start-up
  const s = [...rest].sort((a, b) => a - b);
  return { unit: entry.own_figure.unit, all: xs, median: s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2 };
}

function sanity(entry, work, python, env) {
  const store = join(work, ".brim-bench-store");
  const r = brim(
    ["run", "--quiet", "--store", store, "--steps", String(entry.run_steps), "--", python, ...entry.command],
    join(work, entry.cwd ?? "."),
    env,
    runTimeout,
  );
  const id = newest(join(store, "runs"));
  const meta = id ? readJson(join(store, "runs", id, "run.json")) : null;
  const s = meta?.summary ?? null;
  const own = ownFigure(entry, r.output);
  const expected = entry.expect_steps ?? entry.run_steps;
  return {
    command: `brim run --steps ${entry.run_steps} -- python ${entry.command.join(" ")}`,
    exit: r.status,
    killed: r.signal,
    wall_s: r.wall_s,
    steps: s?.steps ?? null,
    steps_expected: expected,
    exact_stop: s ? s.steps === expected : false,
    samples_per_s: s?.samples_per_s ?? null,
    step_time_s: s?.step_time_s ?? null,
    throughput_source: s?.throughput_source ?? null,
    micro_batch: s?.micro_batch ?? null,
    accumulation: s?.accumulation ?? null,
    data_wait_share: s?.data_wait_share ?? null,
    own_step_ms: own?.median ?? null,
    own_step_ms_lines: own?.all ?? [],
    brim_over_own_step_time: own?.median && s?.step_time_s ? Number(((s.step_time_s * 1000) / own.median).toFixed(3)) : null,
    last_lines: s ? undefined : lastLines(r.output),
  };
}

const KNOWN = new Set([
  "schema",
  "id",
  "command",
  "cwd",
  "bindings",
  "cap_bytes",
  "cap_scope",
  "started_at",
  "ended_at",
  "trials",
  "winner",
  "stop_reason",
  "notes",
]);

function tune(entry, work, python, env) {
  const store = join(work, ".brim-bench-store");
  const r = brim(
    ["tune", "--quiet", "--store", store, "--max-time", `${tuneTime}s`, "--", python, ...entry.command],
    join(work, entry.cwd ?? "."),
    env,
    tuneTime + 150,
  );
  const id = newest(join(store, "tunes"));
  const rec = id ? readJson(join(store, "tunes", id, "tune.json")) : null;
  const trials = rec?.trials ?? [];
  const winner = rec?.winner ?? null;
  const base = trials.find((t) => t.index === 0);
  const tried = new Set();
  for (const t of trials) for (const [k, v] of Object.entries(t.knobs ?? {})) if (JSON.stringify(v) !== JSON.stringify(base?.knobs?.[k])) tried.add(k);
  const outcome =
    r.signal || r.status === null
      ? "killed at the bench's time limit"
      : !rec
        ? "failed before a tune record"
        : r.status === 0 && winner && winner.index !== 0
          ? "winner"
          : r.status === 0 && winner
            ? "winner is trial 0 (your configuration)"
            : r.status === 3
              ? "no winner"
              : r.status === 0
                ? "ended without a winner, exit 0"
                : `exit ${r.status}`;
  return {
    command: `brim tune --max-time ${tuneTime}s -- python ${entry.command.join(" ")}`,
    exit: r.status,
    killed: r.signal,
    wall_s: r.wall_s,
    outcome,
    bindings: rec?.bindings ?? [],
    knobs_seen: base ? Object.keys(base.knobs ?? {}) : [],
    knobs_varied: [...tried],
    trials: trials.map((t) => ({
      index: t.index,
      knobs: t.knobs,
      purpose: t.purpose,
      end: t.end,
      samples_per_s: t.samples_per_s,
      data_wait_share: t.data_wait_share,
      measured_s: t.measured_s ?? null,
      failure: t.failure?.cause ?? t.failure?.kind ?? null,
    })),
    winner,
    stop_reason: rec?.stop_reason ?? null,
    notes: rec?.notes ?? [],
    more: rec ? Object.fromEntries(Object.entries(rec).filter(([k]) => !KNOWN.has(k))) : {},
    closing_lines: lastLines(r.output, 14),
  };
}

const mounted = (dir) =>
  readFileSync("/proc/mounts", "utf8")
    .split("\n")
    .some((line) => line.split(" ")[1] === dir);

/** What keeps an entry's slow storage from being mounted here, or null. */
function storageLacks(entry, python) {
  if (!entry.storage) return null;
  if (!existsSync("/dev/fuse")) return "no /dev/fuse on this host (the entry reads its data through a FUSE latency mount)";
  const fusePython = process.env.BRIM_BENCH_FUSE_PYTHON ?? python;
  const r = spawnSync(fusePython, ["-c", "import fuse"], { encoding: "utf8" });
  return r.status === 0 ? null : `${fusePython} cannot import fuse (pip install fusepy; Debian: libfuse2), needed for the latency mount`;
}

/** Mounts the entry's data folder behind bench/io/latencyfs.py; returns how to unmount it. */
async function mountStorage(entry, work, python) {
  const { source, mount, latency_ms: latency } = entry.storage;
  const at = join(work, mount);
  mkdirSync(at, { recursive: true });
  const fuse = spawn(
    process.env.BRIM_BENCH_FUSE_PYTHON ?? python,
    [join(repo, "bench", "io", "latencyfs.py"), join(work, source), at, "--latency-ms", String(latency)],
    {
      stdio: "ignore",
    },
  );
  for (let i = 0; i < 100 && !mounted(at); i++) await new Promise((r) => setTimeout(r, 100));
  if (!mounted(at)) throw new Error(`${entry.name}: the latency mount at ${at} did not come up`);
  return () => {
    spawnSync("fusermount", ["-uz", at]); // lazy: a job process still holding a file does not keep the mount (and the copy) alive
    fuse.kill();
  };
}

async function runEntry(entry) {
  const python = PYTHONS[entry.python ?? "main"];
  const lacks = missing(python, entry) ?? storageLacks(entry, python);
  if (lacks) return { name: entry.name, skipped: lacks };
  const work = mkdtempSync(join(tmpdir(), `brim-corpus-${entry.name}-`));
  let unmount = () => {};
  try {
    cpSync(join(repo, "corpus", entry.dir), work, { recursive: true });
    const env = { ...(entry.env ?? {}) };
    let prepare = null;
    if (entry.prepare) {
      const p = spawnSync("nice", ["-n", "5", python, ...entry.prepare], { cwd: work, encoding: "utf8", env: { ...process.env, ...env } });
      prepare = { exit: p.status, last_lines: lastLines(`${p.stdout}\n${p.stderr}`, 4) };
      if (p.status !== 0) return { name: entry.name, prepare, error: "prepare failed" };
    }
    if (entry.storage) unmount = await mountStorage(entry, work, python);
    const result = { name: entry.name, dir: entry.dir, cases: entry.cases, knobs_expected: entry.knobs, prepare, storage: entry.storage };
    result.run = sanity(entry, work, python, env);
    console.log(
      `${entry.name}: run ${result.run.steps}/${result.run.steps_expected} steps, ${result.run.samples_per_s ?? "—"} samples/s (${result.run.wall_s} s)`,
    );
    if (!flag("run-only")) {
      result.tune = tune(entry, work, python, env);
      const w = result.tune.winner;
      console.log(
        `${entry.name}: tune ${result.tune.outcome}, ${result.tune.trials.length} trials, knobs ${result.tune.knobs_varied.join(",") || "none varied"}${w ? `, winner ${JSON.stringify(w.knobs)} ×${w.speedup ?? "?"}` : ""} (${result.tune.wall_s} s)`,
      );
    }
    return result;
  } finally {
    unmount();
    rmSync(work, { recursive: true, force: true });
  }
}

const pyVersion = (p) =>
  existsSync(p)
    ? spawnSync(p, ["-c", "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__)"], { encoding: "utf8" }).stdout.trim()
    : null;
const report = {
  command: `node bench/tune-corpus.bench.mjs ${args.join(" ")}`.trim(),
  commit: `${git(["rev-parse", "--short", "HEAD"])}${git(["status", "--porcelain", "--", "src", "python", "bin", "corpus", "bench/tune-corpus.bench.mjs"]) ? "+dirty" : ""}`,
  date: new Date().toISOString(),
  machine: { cpu: cpus()[0]?.model, cores: cpus().length, mem_gib: Math.round(totalmem() / 2 ** 30), node: process.version, gpu: "none (CPU mode)" },
  pythons: Object.fromEntries(Object.entries(PYTHONS).map(([k, p]) => [k, { path: p, version: pyVersion(p) }])),
  tune_time_s: tuneTime,
  entries: [],
};
const previous = flag("merge") && existsSync(out) ? readJson(out) : null;
const call = { command: report.command, commit: report.commit, date: report.date, tune_time_s: tuneTime, entries: entries.map((e) => e.name) };
report.calls = [
  ...(previous?.calls ??
    (previous
      ? [
          {
            command: previous.command,
            commit: previous.commit,
            date: previous.date,
            tune_time_s: previous.tune_time_s,
            entries: previous.entries.map((e) => e.name),
          },
        ]
      : [])),
  call,
];
const order = corpus.entries.map((e) => e.name);
const keep = (previous?.entries ?? []).filter((e) => !entries.some((x) => x.name === e.name)).map((e) => ({ ...e, measured_by: e.measured_by ?? 0 }));
// a merged record names every call that measured it; its commit is the earliest (staleness counts from there)
report.command = report.calls.map((c) => c.command).join(" && ");
report.commit = report.calls[0].commit;
const fresh = [];
for (const entry of entries) {
  fresh.push({ ...(await runEntry(entry)), measured_by: report.calls.length - 1 });
  report.entries = [...keep, ...fresh].sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name));
  writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`); // kept after each entry, so an interrupted run still leaves what it measured
}
report.finished = new Date().toISOString();
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
console.log(`wrote ${out}`);
