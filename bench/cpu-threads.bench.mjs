#!/usr/bin/env node
// Why `cpu_threads` is a knob: the bundled cnn-lstm example (recordings on a simulated network mount,
// examples/cnn-lstm/remote.yaml) run plainly, without brim, at PyTorch's default intra-op threads and
// at one thread, with 0, 2 and 4 loader workers, beside one core kept busy by another process in a
// session of its own (as a browser or a call on a laptop) and, with --idle, beside nothing. The
// configurations are interleaved round by round; each run's samples/s is the example's own
// `samples_per_s` line.
// Usage: node bench/cpu-threads.bench.mjs [--rounds 3] [--steps 24] [--idle] [--python PATH] [--out FILE]
import { spawn, spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join, resolve } from "node:path";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1] : fallback;
};
const repo = resolve(import.meta.dirname, "..");
const venv = join(repo, ".venv", "bin", "python");
const python = option("python", existsSync(venv) ? venv : "python3");
const rounds = Number(option("rounds", "3"));
const steps = option("steps", "24");
const busy = !args.includes("--idle");
const out = option("out", join(repo, "bench", "results", busy ? "cpu-threads.json" : "cpu-threads-idle.json"));
const commit = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: repo, encoding: "utf8" }).stdout.trim();
const torch = spawnSync(python, ["-c", "import torch; print(torch.__version__, torch.get_num_threads())"], { encoding: "utf8" }).stdout.trim();

const CONFIGS = [];
for (const threads of [null, 1]) for (const workers of [0, 2, 4]) CONFIGS.push({ threads, workers });
const label = ({ threads, workers }) => `threads=${threads ?? "default"} workers=${workers}`;

// the busy core: its own session (detached), as other work on a user's machine is
const hog = busy ? spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore", detached: true }) : null;
const rates = new Map(CONFIGS.map((c) => [label(c), []]));
try {
  for (let round = 1; round <= rounds; round++) {
    for (const config of round % 2 === 1 ? CONFIGS : [...CONFIGS].reverse()) {
      const env = { ...process.env };
      delete env.BRIM_CHANNEL;
      if (config.threads !== null) env.OMP_NUM_THREADS = String(config.threads);
      else delete env.OMP_NUM_THREADS;
      const r = spawnSync(
        python,
        ["examples/cnn-lstm/train.py", "--config", "examples/cnn-lstm/remote.yaml", "--steps", steps, "--set", `data_loader.num_workers=${config.workers}`],
        { cwd: repo, encoding: "utf8", env, timeout: 600_000 },
      );
      const rate = Number(/samples_per_s=([0-9.]+)/.exec(`${r.stdout}${r.stderr}`)?.[1] ?? NaN);
      if (!Number.isFinite(rate)) throw new Error(`${label(config)}: no samples_per_s line (exit ${r.status}): ${r.stderr.slice(-400)}`);
      rates.get(label(config)).push(rate);
      console.log(`round ${round} ${label(config)}: ${rate} samples/s`);
    }
  }
} finally {
  if (hog !== null) process.kill(-hog.pid, "SIGKILL");
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const report = {
  command: `node bench/cpu-threads.bench.mjs ${args.join(" ")}`.trim(),
  commit,
  measured_at: new Date().toISOString(),
  machine: { cpu: cpus()[0]?.model, cores: cpus().length, node: process.version, python, torch, load_1m_at_end: Number(loadavg()[0].toFixed(2)) },
  beside: busy ? "one core kept busy by another process in its own session (node -e 'for(;;){}', detached)" : "nothing started beside it",
  job: `examples/cnn-lstm/train.py --config examples/cnn-lstm/remote.yaml --steps ${steps}, run without brim; threads=1 is OMP_NUM_THREADS=1`,
  results: CONFIGS.map((config) => ({ ...config, samples_per_s: rates.get(label(config)), median: median(rates.get(label(config))) })),
};
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
console.log(`wrote ${out}`);
