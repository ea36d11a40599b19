// `brim plan -- <command>` on unmodified scripts: every bundled example (examples/) and every corpus entry
// (corpus/corpus.json: installed entry points, each in a temporary copy after its generator, in its venv,
// as bench/tune-corpus.bench.mjs runs them).
// Per script: exit status, wall time, the GPUs planned, the two measured points and the fit, and per GPU
// the largest micro-batch per precision and your config's share. Needs `npm run build` first.
//
//   node bench/plan-script.bench.mjs [--only nbeats,pe-mnist] [--out bench/results/plan-script.json]
//
// Pythons: BRIM_BENCH_PYTHON (default the repository's .venv) for the examples; for the corpus, each venv
// of corpus.json at its path or BRIM_BENCH_<NAME>_PYTHON.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";

const repo = resolve(import.meta.dirname, "..");
const args = process.argv.slice(2);
if (args.includes("--help") || args.includes("-h")) {
  // the usage is this file's header: nothing runs, no record is rewritten
  const header = readFileSync(new URL(import.meta.url), "utf8").split("\n");
  process.stdout.write(
    `${header
      .slice(
        0,
        header.findIndex((l) => !l.startsWith("//")),
      )
      .map((l) => l.replace(/^\/\/ ?/, ""))
      .join("\n")}\n`,
  );
  process.exit(0);
}
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1] : fallback;
};
const out = resolve(option("out", join(repo, "bench", "results", "plan-script.json")));
const corpus = JSON.parse(readFileSync(join(repo, "corpus", "corpus.json"), "utf8"));
const PYTHONS = {
  ...Object.fromEntries(
    Object.entries(corpus.venvs).map(([name, v]) => [name, process.env[`BRIM_BENCH_${name.toUpperCase()}_PYTHON`] ?? join(repo, v.path, "bin", "python")]),
  ),
  main: process.env.BRIM_BENCH_PYTHON ?? join(repo, ".venv", "bin", "python"),
};
const BRIM = join(repo, "bin", "brim.js");
const git = (a) => spawnSync("git", a, { cwd: repo, encoding: "utf8" }).stdout?.trim() ?? "";
const lastLines = (text, n) =>
  text
    .split("\n")
    .map((l) => l.trimEnd())
    .filter((l) => l !== "")
    .slice(-n);

const EXAMPLES = [
  ["nbeats", ["examples/nbeats/train.py", "--config", "examples/nbeats/config.yaml"]],
  ["lstm-transformer", ["examples/lstm-transformer/train.py", "--config", "examples/lstm-transformer/config.yaml"]],
  ["embedder", ["examples/embedder/train.py", "--config", "examples/embedder/config.yaml"]],
  ["cnn-lstm", ["examples/cnn-lstm/train.py", "--config", "examples/cnn-lstm/config.yaml"]],
  ["ppo", ["examples/ppo/train.py", "--config", "examples/ppo/config.yaml"]],
  ["lightning", ["examples/lightning/train.py", "--config", "examples/lightning/config.yaml"]],
  ["hf-trainer", ["examples/hf-trainer/train.py", "--config", "examples/hf-trainer/config.yaml"]],
  // a plan per curriculum stage: the stage as a knob (the embedder reads brim.knob("stage"))
  ["embedder-stages", ["examples/embedder/train.py", "--config", "examples/embedder/config.yaml"], ["--knob", "stage=short,long"]],
];
// every entry of the corpus, in its order
const CORPUS = corpus.entries.map((e) => e.name);
const only = option("only", null)?.split(",");

function plan(name, python, command, cwd, env = {}, extra = []) {
  const argv = [BRIM, "plan", "--json", "--store", join(tmpdir(), "brim-plan-script-bench"), ...extra, "--", python, ...command];
  const t0 = Date.now();
  const r = spawnSync("nice", ["-n", "5", process.execPath, ...argv], { cwd, encoding: "utf8", env: { ...process.env, ...env }, timeout: 1_200_000 });
  const wall = Math.round((Date.now() - t0) / 100) / 10;
  const row = {
    name,
    command: ["brim", "plan", ...extra, "--", /python[\d.]*$/.test(python) ? "python" : basename(python), ...command],
    cwd: cwd === repo ? "." : "(temporary copy)",
    exit: r.status,
    wall_s: wall,
  };
  if (r.status !== 0) return { ...row, stderr_tail: lastLines(r.stderr, 12) };
  row.knobs_line = lastLines(r.stderr, 40).find((l) => l.startsWith("brim: knobs found")) ?? null;
  const parsed = JSON.parse(r.stdout);
  if (parsed.schema === "brim.plan-script-stages/v1") {
    const stages = parsed.plans.map((s) => ({ value: s.value, ...summary({}, s.plan) }));
    return { ...row, knob: parsed.knob, stages, gpus: stages[0]?.gpus ?? [] };
  }
  return summary(row, parsed);
}

function summary(row, p) {
  return {
    ...row,
    params: p.params,
    optimizer: `${p.optimizer_classes.join(",")} → ${p.optimizer}`,
    yours: p.yours,
    fit: {
      method: p.fit.method,
      points: p.fit.points.map((x) => ({
        run: x.run_id,
        micro_batch: x.micro_batch,
        saved_bytes: x.saved_bytes,
        forwards: x.forwards,
        rss_peak_bytes: x.rss_peak_bytes,
      })),
      saved_per_sample_bytes: Math.round(p.fit.saved_per_sample_bytes),
      saved_fixed_bytes: Math.round(p.fit.saved_fixed_bytes),
      input_per_sample_bytes: Math.round(p.fit.input_per_sample_bytes),
    },
    gpus: p.gpus.map((g) => ({
      gpu: g.gpu.id,
      largest: g.largest,
      yours_share: g.yours.share_of_gpu,
      fits: g.yours.fits,
      better: g.better,
      gpu_terms: g.calibration === null ? "default" : "calibrated",
    })),
    notes: p.notes,
  };
}

const rows = [];
for (const [name, command, extra] of EXAMPLES) {
  if (only && !only.includes(name)) continue;
  const row = plan(`example:${name}`, PYTHONS.main, command, repo, {}, extra ?? []);
  console.log(`${row.name}: exit ${row.exit}, ${row.wall_s} s${row.gpus ? `, ${row.gpus.length} GPUs` : `: ${row.stderr_tail?.at(-1)}`}`);
  rows.push(row);
}
for (const name of CORPUS) {
  if (only && !only.includes(name)) continue;
  const entry = corpus.entries.find((e) => e.name === name);
  const python = PYTHONS[entry.venv];
  if (!existsSync(python)) {
    rows.push({ name: `corpus:${name}`, skipped: `no python at ${python}` });
    continue;
  }
  const work = mkdtempSync(join(tmpdir(), `brim-plan-${name}-`));
  try {
    cpSync(join(repo, "corpus", entry.dir), work, { recursive: true });
    const env = entry.env ?? {};
    if (entry.prepare) {
      const p = spawnSync("nice", ["-n", "5", python, ...entry.prepare], { cwd: work, encoding: "utf8", env: { ...process.env, ...env } });
      if (p.status !== 0) {
        rows.push({ name: `corpus:${name}`, error: "prepare failed", tail: lastLines(`${p.stdout}\n${p.stderr}`, 6) });
        continue;
      }
    }
    // a console script (litgpt, trl) is the one beside the venv's python
    const row = entry.executable
      ? plan(`corpus:${name}`, join(dirname(python), entry.executable), entry.command, work, env)
      : plan(`corpus:${name}`, python, entry.command, work, env);
    console.log(`${row.name}: exit ${row.exit}, ${row.wall_s} s${row.gpus ? `, ${row.gpus.length} GPUs` : `: ${row.stderr_tail?.at(-1)}`}`);
    rows.push(row);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

const report = {
  schema: "brim.bench-plan-script/v1",
  command: `node bench/plan-script.bench.mjs ${args.join(" ")}`.trim(),
  commit: `${git(["rev-parse", "--short", "HEAD"])}${git(["status", "--porcelain", "--", "src", "python", "bin"]) ? "+dirty" : ""}`,
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? null, node: process.version, gpu: "none (CPU-only host)" },
  pythons: Object.fromEntries(
    Object.entries(PYTHONS).map(([k, p]) => [
      k,
      existsSync(p)
        ? spawnSync(p, ["-c", "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__)"], { encoding: "utf8" }).stdout.trim()
        : null,
    ]),
  ),
  passed: rows.filter((r) => r.exit === 0 && (r.gpus?.length ?? 0) >= 3).length,
  rows,
};
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
console.log(`${report.passed} of ${rows.length} planned for ≥ 3 GPUs; written to ${out}`);
