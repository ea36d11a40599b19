#!/usr/bin/env node
// brim's search against doubling-then-bisection and an exhaustive grid, on real trial runs: trials
// used, wall time, and the best measured throughput each reached (as a share of the grid's best).
// Usage (after `npm run build`):
//   node bench/tune-strategies.bench.mjs [--jobs oracle,ppo] [--out bench/results/tune-strategies.json]
//   node bench/tune-strategies.bench.mjs --jobs readme   # the README's first command: wall time, and its
//     winner's share of an exhaustive grid's best, the grid measuring the winner beside the others in one run
//     (--no-grid: the README's command alone, timed, with its confirmed speedup)
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

// The README's first command as a user runs it, then a grid (micro-batch × loader workers) that also
// measures the winner's configuration, so that the share compares numbers taken in the same run.
const README = {
  command: [python, join(repo, "examples/nbeats/train.py"), "--config", join(repo, "examples/nbeats/config.yaml")],
  args: ["--max-trials", "4", "--steps", "8"],
  grid: [32, 64, 128, 256, 512],
  gridWorkers: [0, 1],
};

function run(argv) {
  const started = Date.now();
  const result = spawnSync(process.execPath, [join(repo, "bin", "brim.js"), ...argv], { encoding: "utf8", maxBuffer: 64 * MiB, cwd: repo });
  return { result, wall_s: Number(((Date.now() - started) / 1000).toFixed(1)) };
}

function readmeJob() {
  const store = mkdtempSync(join(tmpdir(), "brim-bench-readme-"));
  const first = run(["tune", "--json", "--store", store, ...README.args, "--", ...README.command]);
  if (first.result.status !== 0) {
    rmSync(store, { recursive: true, force: true });
    throw new Error(`the README's command failed: ${first.result.stderr.slice(-600)}`);
  }
  const record = JSON.parse(first.result.stdout);
  const winner = record.winner?.knobs ?? null;
  const timed = {
    command: `node bin/brim.js tune ${README.args.join(" ")} -- /usr/bin/python3 examples/nbeats/train.py --config examples/nbeats/config.yaml`,
    wall_s: first.wall_s,
    within_3_minutes: first.wall_s <= 180,
    trials: record.trials.length,
    winner_knobs: winner,
    winner_speedup: record.winner?.speedup ?? null,
    // the speedup the tune printed: the winner and the baseline measured again interleaved (A/B/A/B)
    confirmation: record.confirmation ?? null,
    no_winner: record.no_winner ?? null,
    stop_reason: record.stop_reason,
    fixed_cost_s: record.trials.map((t) => t.fixed_cost_s ?? null),
  };
  if (args.includes("--no-grid")) {
    rmSync(store, { recursive: true, force: true });
    return { ...timed, grid: null, winner_in_grid_samples_per_s: null, winner_share_of_grid_best: null };
  }
  const micro = [...new Set([...README.grid, ...(typeof winner?.batch_size === "number" ? [winner.batch_size] : [])])].sort((a, b) => a - b);
  const grid = run([
    "tune",
    "--json",
    "--store",
    store,
    "--strategy",
    "grid",
    "--knob",
    `batch_size=${micro.join(",")}`,
    "--knob",
    `num_workers=${README.gridWorkers.join(",")}`,
    "--max-trials",
    String(micro.length * README.gridWorkers.length + 1),
    "--steps",
    "8",
    "--",
    ...README.command,
  ]);
  rmSync(store, { recursive: true, force: true });
  if (grid.result.status !== 0) throw new Error(`the grid failed: ${grid.result.stderr.slice(-600)}`);
  const gridRecord = JSON.parse(grid.result.stdout);
  const ok = gridRecord.trials.filter((t) => t.end === "ok" && t.samples_per_s !== null && t.oom_recoveries === 0);
  const key = (knobs) => JSON.stringify(["batch_size", "num_workers"].map((k) => knobs?.[k]));
  const best = ok.length > 0 ? Math.max(...ok.map((t) => t.samples_per_s)) : null;
  const atWinner = ok.filter((t) => key(t.knobs) === key(winner)).map((t) => t.samples_per_s);
  // a winner the grid stopped early as clearly slower counts as its bound
  const bounded = gridRecord.trials.filter((t) => t.end === "slower" && key(t.knobs) === key(winner)).map((t) => t.samples_per_s ?? 0);
  const winnerRate = atWinner.length > 0 ? Math.max(...atWinner) : bounded.length > 0 ? Math.max(...bounded) : null;
  return {
    ...timed,
    grid: { micro_batches: micro, num_workers: README.gridWorkers, trials: gridRecord.trials.length, wall_s: grid.wall_s, best_samples_per_s: best },
    winner_in_grid_samples_per_s: winnerRate,
    winner_share_of_grid_best: best && winnerRate ? Number((winnerRate / best).toFixed(3)) : null,
  };
}

function tune(job, strategy) {
  const store = mkdtempSync(join(tmpdir(), "brim-bench-tune-"));
  const extra = strategy === "grid" ? ["--knob", `batch_size=${job.grid.join(",")}`, "--max-trials", String(job.grid.length + 1)] : ["--max-trials", "16"];
  const argv = [join(repo, "bin", "brim.js"), "tune", "--json", "--store", store, "--strategy", strategy, ...job.options, ...extra, "--", ...job.command];
  const started = Date.now();
  const result = spawnSync(process.execPath, argv, { encoding: "utf8", env: { ...process.env, ...job.env }, maxBuffer: 64 * MiB });
  rmSync(store, { recursive: true, force: true });
  // a tune that ends with no winner exits non-zero and still prints its record (e.g. bisection's edge
  // winner refused when its re-measures spill over the cap): that is a result, not a failure
  if (result.status !== 0 && !result.stdout.trimStart().startsWith("{"))
    throw new Error(`brim tune --strategy ${strategy} failed: ${result.stderr.slice(-600)}`);
  const record = JSON.parse(result.stdout);
  const ok = record.trials.filter((t) => t.end === "ok" && t.samples_per_s !== null && t.oom_recoveries === 0);
  const winner = record.trials.find((t) => t.index === record.winner?.index);
  return {
    strategy,
    trials: record.trials.length,
    wall_s: Number(((Date.now() - started) / 1000).toFixed(1)),
    winner_knobs: record.winner?.knobs ?? null,
    no_winner: record.no_winner?.reason ?? null,
    winner_samples_per_s: winner?.samples_per_s ?? null,
    best_measured_samples_per_s: ok.length > 0 ? Math.max(...ok.map((t) => t.samples_per_s)) : null,
    over_cap_trials: record.trials.filter((t) => t.end === "cap_exceeded" || t.end === "gpu_oom" || t.end === "host_oom").length,
  };
}

const jobs = option("jobs", "oracle,ppo").split(",");
const wantsReadme = jobs.includes("readme");
const report = {
  command: `node bench/tune-strategies.bench.mjs ${args.join(" ")}`.trim(),
  machine: { cpu: cpus()[0]?.model, cores: cpus().length, node: process.version, gpu: "none (CPU mode, RAM cap)" },
  jobs: {},
};
if (wantsReadme) {
  const r = readmeJob();
  report.readme = r;
  console.log(
    `readme: ${r.wall_s} s (${r.within_3_minutes ? "within" : "over"} 3 minutes), ${r.trials} trials, winner ${JSON.stringify(r.winner_knobs)}` +
      (r.grid === null ? "" : `, ${r.winner_share_of_grid_best} of the grid's best (grid ${r.grid.trials} trials, ${r.grid.wall_s} s)`),
  );
}
for (const name of jobs.filter((j) => j !== "readme")) {
  const job = JOBS[name];
  if (!job) throw new Error(`unknown job ${name}; known: ${Object.keys(JOBS).join(", ")}`);
  const results = ["brim", "doubling-bisection", "grid"].map((strategy) => tune(job, strategy));
  const gridBest = results.find((r) => r.strategy === "grid")?.best_measured_samples_per_s ?? null;
  for (const r of results) r.winner_share_of_grid_best = gridBest && r.winner_samples_per_s ? Number((r.winner_samples_per_s / gridBest).toFixed(3)) : null;
  report.jobs[name] = { tune_options: job.options, grid: job.grid, results };
  for (const r of results)
    console.log(
      `${name} ${r.strategy}: ${r.trials} trials, ${r.wall_s} s, winner ${JSON.stringify(r.winner_knobs?.batch_size)} at ${r.winner_samples_per_s} samples/s (${r.winner_share_of_grid_best} of the grid's best)`,
    );
}
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
console.log(`wrote ${out}`);
