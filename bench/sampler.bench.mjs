#!/usr/bin/env node
// The sampler's own CPU cost: process.cpuUsage() of this process over wall time, in % of one
// core, while the sampler follows a small process tree at 10 Hz. Run `npm run build` first.
// Usage: node bench/sampler.bench.mjs [--seconds 10] [--hz 10]
import { spawn } from "node:child_process";
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { cpus, platform, release } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { openDevices, startSampler } from "../dist/devices/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const arg = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 && process.argv[at + 1] !== undefined ? Number(process.argv[at + 1]) : fallback;
};
const seconds = arg("seconds", 10);
const hz = arg("hz", 10);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function cpuOver(ms) {
  const before = process.cpuUsage();
  const started = performance.now();
  return sleep(ms).then(() => {
    const used = process.cpuUsage(before);
    const wallMs = performance.now() - started;
    return { cpuMs: (used.user + used.system) / 1000, wallMs, percentOfCore: ((used.user + used.system) / 1000 / wallMs) * 100 };
  });
}

function quantile(sorted, q) {
  return sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

// A job-like tree: a shell with two sleeping children and a node "worker" that ticks.
const tree = spawn("sh", ["-c", `sleep 120 & sleep 120 & ${JSON.stringify(process.execPath)} -e "setInterval(() => {}, 1000)" & wait`], {
  detached: true,
  stdio: "ignore",
});
const devices = openDevices();
try {
  await sleep(300);
  const inventory = devices.inventory();
  const baseline = await cpuOver(3000);

  const readMs = [];
  const timed = {
    inventory: () => devices.inventory(),
    close: () => devices.close(),
    async read(rootPid) {
      const started = performance.now();
      const reading = await devices.read(rootPid);
      readMs.push(performance.now() - started);
      return reading;
    },
  };
  let last = null;
  const before = process.cpuUsage();
  const started = performance.now();
  const sampler = startSampler(timed, { rootPid: tree.pid, hz, onReading: (r) => (last = r) });
  await sleep(seconds * 1000);
  await sampler.stop();
  const used = process.cpuUsage(before);
  const wallMs = performance.now() - started;
  const cpuMs = (used.user + used.system) / 1000;
  const counts = sampler.counts();
  readMs.sort((a, b) => a - b);

  const result = {
    benchmark: "sampler-cpu",
    command: `node bench/sampler.bench.mjs --seconds ${seconds} --hz ${hz}`,
    date: new Date().toISOString(),
    machine: {
      cpu: cpus()[0]?.model ?? null,
      cpus: cpus().length,
      node: process.version,
      platform: `${platform()} ${release()}`,
      processes_in_proc: readdirSync("/proc").filter((n) => /^\d+$/.test(n)).length,
    },
    backend: inventory.backend,
    gpus: inventory.gpus.length,
    hz,
    wall_s: wallMs / 1000,
    readings: counts.readings,
    readings_per_s: counts.readings / (wallMs / 1000),
    skipped_ticks: counts.skipped,
    errors: counts.errors,
    tree_pids: last?.tree?.pids.length ?? null,
    sampler_cpu_ms: cpuMs,
    sampler_cpu_percent_of_core: (cpuMs / wallMs) * 100,
    idle_baseline_cpu_percent_of_core: baseline.percentOfCore,
    cpu_ms_per_reading: cpuMs / Math.max(1, counts.readings),
    read_latency_ms: { p50: quantile(readMs, 0.5), p95: quantile(readMs, 0.95), max: readMs.at(-1) ?? null },
  };
  mkdirSync(join(here, "results"), { recursive: true });
  writeFileSync(join(here, "results", "sampler-cpu.json"), JSON.stringify(result, null, 2) + "\n");
  console.log(JSON.stringify(result, null, 2));
} finally {
  devices.close();
  try {
    process.kill(-tree.pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}
