#!/usr/bin/env node
// `brim run --steps N` and `brim tune` on every entry of the corpus (corpus/corpus.json, schema brim.corpus/v2:
// training entry points installed from PyPI, run as their users type them, with our configs and generated
// data). Each entry runs in a temporary copy of its folder after its generator (`prepare`), in the venv
// corpus.json names for it; per entry it records the exact commands, whether the run stopped at exactly N
// steps, what brim measured, and the tune's knobs, trials and verdict (as tune.json in the run store has it).
// Usage (after `npm run build`):
//   node bench/tune-corpus.bench.mjs [--only a,b] [--fast] [--tune-time 120] [--max-trials 3] [--run-timeout 240] [--run-only] [--merge] [--out bench/results/tune-corpus.json] [--help]
// --merge keeps the entries of an existing record that this call does not run (each entry says which
// call measured it: its `measured_by`, an index into `calls`).
// Pythons: each venv of corpus.json at its path (.venv, .venv-corpus, .venv-corpus-llm, made from the
// requirements file it names; docs/corpus.md), or BRIM_BENCH_<NAME>_PYTHON (BRIM_BENCH_MAIN_PYTHON, …).
// An entry whose venv is missing or lacks its pinned packages is recorded as skipped, with the reason.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";

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
const tuneTime = Number(option("tune-time", "120"));
const maxTrials = Number(option("max-trials", "3"));
const runTimeout = Number(option("run-timeout", "240"));
const PYTHONS = Object.fromEntries(
  Object.entries(corpus.venvs).map(([name, v]) => [name, process.env[`BRIM_BENCH_${name.toUpperCase()}_PYTHON`] ?? join(repo, v.path, "bin", "python")]),
);
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

/** What an entry's python lacks of its pinned packages, or null when it has them all. */
function missing(python, entry) {
  if (!existsSync(python)) return `no python at ${python}`;
  const r = spawnSync(
    python,
    [
      "-c",
      "import importlib.metadata as m, sys\nfor n in sys.argv[1:]:\n  try: print(n, m.version(n))\n  except Exception: print(n, '-')",
      ...Object.keys(entry.packages),
    ],
    { encoding: "utf8" },
  );
  const wrong = r.stdout
    .trim()
    .split("\n")
    .map((l) => l.split(" "))
    .filter(([n, v]) => entry.packages[n] !== v)
    .map(([n, v]) => `${n} ${v === "-" ? "missing" : `${v} (pinned ${entry.packages[n]})`}`);
  return wrong.length ? `${python}: ${wrong.join(", ")}` : null;
}

/** The job's command line: the venv's python, or the entry point's console script beside it. */
const program = (entry, python) => [entry.executable ? join(dirname(python), entry.executable) : python, ...entry.command];
/** As a user types it (no venv path). */
const typed = (entry) => [entry.executable ?? "python", ...entry.command].join(" ");

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

function sanity(entry, work, python, env) {
  const store = join(work, ".brim-bench-store");
  const r = brim(["run", "--quiet", "--store", store, "--steps", String(entry.run_steps), "--", ...program(entry, python)], work, env, runTimeout);
  const id = newest(join(store, "runs"));
  const meta = id ? readJson(join(store, "runs", id, "run.json")) : null;
  const s = meta?.summary ?? null;
  return {
    command: `brim run --steps ${entry.run_steps} -- ${typed(entry)}`,
    exit: r.status,
    killed: r.signal,
    wall_s: r.wall_s,
    steps: s?.steps ?? null,
    steps_expected: entry.run_steps,
    exact_stop: s ? s.steps === entry.run_steps : false,
    samples_per_s: s?.samples_per_s ?? null,
    step_time_s: s?.step_time_s ?? null,
    throughput_source: s?.throughput_source ?? null,
    micro_batch: s?.micro_batch ?? null,
    accumulation: s?.accumulation ?? null,
    data_wait_share: s?.data_wait_share ?? null,
    last_lines: s?.steps === entry.run_steps ? undefined : lastLines(r.output),
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
    ["tune", "--quiet", "--store", store, "--max-time", `${tuneTime}s`, "--max-trials", String(maxTrials), "--", ...program(entry, python)],
    work,
    env,
    tuneTime + 240,
  );
  const id = newest(join(store, "tunes"));
  const rec = id ? readJson(join(store, "tunes", id, "tune.json")) : null;
  const trials = rec?.trials ?? [];
  const winner = rec?.winner ?? null;
  const base = trials.find((t) => t.index === 0);
  const tried = new Set();
  for (const t of trials) for (const [k, v] of Object.entries(t.knobs ?? {})) if (JSON.stringify(v) !== JSON.stringify(base?.knobs?.[k])) tried.add(k);
  const outcome =
    r.signal || r.status === null || (r.status === 130 && r.wall_s >= tuneTime + 240)
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
    command: `brim tune --max-time ${tuneTime}s --max-trials ${maxTrials} -- ${typed(entry)}`,
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

async function runEntry(entry) {
  const python = PYTHONS[entry.venv];
  const lacks = missing(python, entry);
  if (lacks) return { name: entry.name, skipped: lacks };
  const work = mkdtempSync(join(tmpdir(), `brim-corpus-${entry.name}-`));
  try {
    cpSync(join(repo, "corpus", entry.dir), work, { recursive: true });
    const env = { ...(entry.env ?? {}) };
    let prepare = null;
    if (entry.prepare) {
      const p = spawnSync("nice", ["-n", "5", python, ...entry.prepare], { cwd: work, encoding: "utf8", env: { ...process.env, ...env } });
      prepare = { command: `python ${entry.prepare.join(" ")}`, exit: p.status, last_lines: lastLines(`${p.stdout}\n${p.stderr}`, 4) };
      if (p.status !== 0) return { name: entry.name, prepare, error: "prepare failed" };
    }
    const result = { name: entry.name, dir: entry.dir, venv: entry.venv, packages: entry.packages, cases: entry.cases, prepare };
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
  schema: "brim.bench-tune-corpus/v2",
  corpus_schema: corpus.schema,
  tune_time_s: tuneTime,
  max_trials: maxTrials,
  entries: [],
};
const previous = flag("merge") && existsSync(out) ? readJson(out) : null;
if (previous !== null) {
  // a merged record keeps what earlier calls measured with: the Pythons of the venvs this call did not use
  const used = new Set(entries.map((e) => e.venv));
  report.pythons = Object.fromEntries(Object.entries(report.pythons).map(([k, p]) => [k, used.has(k) ? p : (previous.pythons?.[k] ?? p)]));
}
const call = {
  command: report.command,
  commit: report.commit,
  date: report.date,
  tune_time_s: tuneTime,
  max_trials: maxTrials,
  entries: entries.map((e) => e.name),
};
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
