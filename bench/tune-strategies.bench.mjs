#!/usr/bin/env node
// brim's search against doubling-then-bisection and an exhaustive grid, on real trial runs: trials
// used, wall time, and the best measured throughput each reached (as a share of the grid's best).
// Usage (after `npm run build`):
//   node bench/tune-strategies.bench.mjs [--jobs oracle,ppo] [--out bench/results/tune-strategies.json]
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1] : fallback;
};
const repo = resolve(import.meta.dirname, "..");
const python = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const out = option("out", join(repo, "bench", "results", "tune-strategies.json"));
const MiB = 2 ** 20;

// Each job: its command, the tune options shared by all strategies, and the grid's micro-batches.
const JOBS = {
  oracle: {
    command: [python, join(repo, "test/jobs/oracle_job.py")],
    env: { ORACLE_PER_SAMPLE_BYTES: String(MiB), ORACLE_KNEE: "96" },
    options: ["--cap", String(100 * MiB), "--fix", "num_workers", "--warmup", "2", "--steps", "10"],
    grid: [8, 16, 24, 32, 40, 48, 56, 64, 66, 68, 70, 72, 80, 96],
  },
  ppo: {
    command: [python, join(repo, "examples/ppo/train.py"), "--config", join(repo, "examples/ppo/config.yaml")],
    env: {},
    options: ["--cap", "6GiB", "--fix", "num_workers", "--warmup", "1", "--steps", "5", "--max-batch", "256"],
    grid: [32, 64, 128, 192, 256],
  },
  nbeats: {
    command: [python, join(repo, "examples/nbeats/train.py"), "--config", join(repo, "examples/nbeats/config.yaml")],
    env: {},
    options: ["--cap", "6GiB", "--fix", "num_workers", "--warmup", "1", "--steps", "4", "--max-batch", "256"],
    grid: [16, 32, 64, 128, 256],
  },
};

function tune(job, strategy) {
  const store = mkdtempSync(join(tmpdir(), "brim-bench-tune-"));
  const extra = strategy === "grid" ? ["--knob", `batch_size=${job.grid.join(",")}`, "--max-trials", String(job.grid.length + 1)] : ["--max-trials", "16"];
  const argv = [join(repo, "bin", "brim.js"), "tune", "--json", "--store", store, "--strategy", strategy, ...job.options, ...extra, "--", ...job.command];
  const started = Date.now();
  const result = spawnSync(process.execPath, argv, { encoding: "utf8", env: { ...process.env, ...job.env }, maxBuffer: 64 * MiB });
  rmSync(store, { recursive: true, force: true });
  if (result.status !== 0) throw new Error(`brim tune --strategy ${strategy} failed: ${result.stderr.slice(-600)}`);
  const record = JSON.parse(result.stdout);
  const ok = record.trials.filter((t) => t.end === "ok" && t.samples_per_s !== null && t.oom_recoveries === 0);
  const winner = record.trials.find((t) => t.index === record.winner?.index);
  return {
    strategy,
    trials: record.trials.length,
    wall_s: Number(((Date.now() - started) / 1000).toFixed(1)),
    winner_knobs: record.winner?.knobs ?? null,
    winner_samples_per_s: winner?.samples_per_s ?? null,
    best_measured_samples_per_s: ok.length > 0 ? Math.max(...ok.map((t) => t.samples_per_s)) : null,
    over_cap_trials: record.trials.filter((t) => t.end === "cap_exceeded" || t.end === "gpu_oom" || t.end === "host_oom").length,
  };
}

const jobs = option("jobs", "oracle,ppo").split(",");
const report = { command: `node bench/tune-strategies.bench.mjs ${args.join(" ")}`.trim(), machine: { cpu: cpus()[0]?.model, cores: cpus().length, node: process.version, gpu: "none (CPU mode, RAM cap)" }, jobs: {} };
for (const name of jobs) {
  const job = JOBS[name];
  if (!job) throw new Error(`unknown job ${name}; known: ${Object.keys(JOBS).join(", ")}`);
  const results = ["brim", "doubling-bisection", "grid"].map((strategy) => tune(job, strategy));
  const gridBest = results.find((r) => r.strategy === "grid")?.best_measured_samples_per_s ?? null;
  for (const r of results) r.winner_share_of_grid_best = gridBest && r.winner_samples_per_s ? Number((r.winner_samples_per_s / gridBest).toFixed(3)) : null;
  report.jobs[name] = { tune_options: job.options, grid: job.grid, results };
  for (const r of results) console.log(`${name} ${r.strategy}: ${r.trials} trials, ${r.wall_s} s, winner ${JSON.stringify(r.winner_knobs?.batch_size)} at ${r.winner_samples_per_s} samples/s (${r.winner_share_of_grid_best} of the grid's best)`);
}
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
console.log(`wrote ${out}`);
