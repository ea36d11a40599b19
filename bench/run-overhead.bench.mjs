#!/usr/bin/env node
// The cost of running under `brim run` (10 Hz sampling, the attach on, SDK channel, timeline) against
// the bare job: each example (instrumented with the SDK, which the attach stands back for) and each
// unmodified script of test/jobs (measured by the attach alone) runs bare and under brim,
// interleaved, several rounds; the job's own samples/s line is compared (same definition on both
// sides). Usage (after `npm run build`):
//   node bench/run-overhead.bench.mjs [--rounds 3] [--steps 30] [--examples nbeats,ppo] [--jobs plain_loop,lstm_lm] [--out bench/results/run-overhead.json]
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
const rounds = Number(option("rounds", "3"));
const steps = option("steps", "30");
const examples = option("examples", "nbeats,ppo").split(",").filter(Boolean);
const jobs = option("jobs", "plain_loop,lstm_lm").split(",").filter(Boolean);
const out = option("out", join(repo, "bench", "results", "run-overhead.json"));
const store = mkdtempSync(join(tmpdir(), "brim-overhead-"));

function samplesPerSecond(stdout) {
  const match = /samples_per_s=([\d.]+)/.exec(stdout);
  if (match) return Number(match[1]);
  // test/jobs print one "<rate> samples/s" line per window: the first window (warm-up) is left out,
  // the others hold equal samples, so their harmonic mean is the rate over them
  const windows = [...stdout.matchAll(/([\d.]+) samples\/s/g)].map((m) => Number(m[1])).slice(1);
  return windows.length === 0 ? null : Number((windows.length / windows.reduce((sum, rate) => sum + 1 / rate, 0)).toFixed(2));
}

function commandOf(target) {
  if (target.kind === "example")
    return [python, join(repo, "examples", target.name, "train.py"), "--config", join(repo, "examples", target.name, "config.yaml"), "--steps", steps];
  return [python, join(repo, "test", "jobs", `${target.name}.py`), "--max-steps", steps];
}

function once(target, underBrim) {
  const job = commandOf(target);
  const command = underBrim ? [process.execPath, join(repo, "bin", "brim.js"), "run", "--quiet", "--hz", "10", "--store", store, "--", ...job] : job;
  const started = process.hrtime.bigint();
  const result = spawnSync(command[0], command.slice(1), { encoding: "utf8", env: { ...process.env, PYTHONPATH: join(repo, "python") } });
  const wallS = Number(process.hrtime.bigint() - started) / 1e9;
  if (result.status !== 0) throw new Error(`${command.join(" ")} failed: ${result.stderr.slice(-400)}`);
  return { samplesPerS: samplesPerSecond(result.stdout), wallS };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const report = {
  command: `node bench/run-overhead.bench.mjs ${args.join(" ")}`.trim(),
  machine: { cpu: cpus()[0]?.model, cores: cpus().length, node: process.version, gpu: "none (CPU mode)" },
  rounds,
  steps: Number(steps),
  examples: {},
};
const targets = [...examples.map((name) => ({ kind: "example", name })), ...jobs.map((name) => ({ kind: "job", name }))];
for (const target of targets) {
  const example = target.kind === "example" ? target.name : `test/jobs/${target.name}`;
  const bare = [];
  const brim = [];
  for (let round = 0; round < rounds; round++) {
    // alternate the order so drift in machine load hits both sides alike
    if (round % 2 === 0) {
      bare.push(once(target, false));
      brim.push(once(target, true));
    } else {
      brim.push(once(target, true));
      bare.push(once(target, false));
    }
  }
  const bareRate = median(bare.map((r) => r.samplesPerS));
  const brimRate = median(brim.map((r) => r.samplesPerS));
  report.examples[example] = {
    bare_samples_per_s: bare.map((r) => r.samplesPerS),
    brim_samples_per_s: brim.map((r) => r.samplesPerS),
    bare_wall_s: bare.map((r) => Number(r.wallS.toFixed(2))),
    brim_wall_s: brim.map((r) => Number(r.wallS.toFixed(2))),
    throughput_ratio_brim_over_bare: Number((brimRate / bareRate).toFixed(4)),
    wall_ratio_brim_over_bare: Number((median(brim.map((r) => r.wallS)) / median(bare.map((r) => r.wallS))).toFixed(4)),
  };
  console.log(
    `${example}: samples/s bare ${bareRate} vs under brim ${brimRate} → ratio ${report.examples[example].throughput_ratio_brim_over_bare}; wall ratio ${report.examples[example].wall_ratio_brim_over_bare}`,
  );
}
rmSync(store, { recursive: true, force: true });
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
console.log(`wrote ${out}`);
