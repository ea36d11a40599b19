#!/usr/bin/env node
// The README's first command (`bash scripts/first-run.sh`) as a newcomer runs it, on this machine, with
// one core kept busy by another process beside it (as a laptop with a browser and a call open):
// its wall time, exit code, and what its tune decided (the confirmed speedup and its 95 % interval,
// the trials, the config line it would change), read from the tune's own record.
// Usage: node bench/first-run.bench.mjs [--rounds 3] [--idle] [--out bench/results/first-run.json]
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1] : fallback;
};
const repo = resolve(import.meta.dirname, "..");
const rounds = Number(option("rounds", "3"));
const out = option("out", join(repo, "bench", "results", "first-run.json"));
const busy = !args.includes("--idle");

const commit = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: repo, encoding: "utf8" }).stdout.trim();
const dirty =
  spawnSync("git", ["status", "--porcelain", "--", "src", "python/brim", "examples", "scripts/first-run.sh"], { cwd: repo, encoding: "utf8" }).stdout.trim() !==
  "";

/** The tune's record: the one tune.json the round's own store holds. */
function tuneRecord(store) {
  const tunes = join(store, "tunes");
  const ids = readdirSync(tunes);
  if (ids.length !== 1) throw new Error(`expected one tune in ${tunes}, found ${ids.length}`);
  return JSON.parse(readFileSync(join(tunes, ids[0], "tune.json"), "utf8"));
}

const results = [];
for (let round = 1; round <= rounds; round++) {
  const store = mkdtempSync(join(tmpdir(), "brim-bench-first-run-"));
  // in a session of its own (detached), as other work on a user's machine is: the kernel's autogroup scheduling weighs sessions
  const hog = busy ? spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore", detached: true }) : null;
  const started = Date.now();
  const r = spawnSync("bash", ["scripts/first-run.sh"], { cwd: repo, encoding: "utf8", env: { ...process.env, BRIM_STORE: store }, maxBuffer: 64 * 2 ** 20 });
  const wall = (Date.now() - started) / 1000;
  if (hog !== null) process.kill(-hog.pid, "SIGKILL");
  const load = loadavg()[0];
  const record = tuneRecord(store);
  rmSync(store, { recursive: true, force: true });
  const c = record.confirmation ?? null;
  const diff = (r.stdout.match(/^[-+] .*$/gm) ?? []).filter((l) => !l.startsWith("--- ") && !l.startsWith("+++ "));
  const result = {
    round,
    exit_code: r.status,
    wall_s: Number(wall.toFixed(1)),
    load_1m_at_end: Number(load.toFixed(2)),
    search_trials: record.trials.filter((t) => !/^confirm/.test(t.purpose ?? "")).length,
    trials: record.trials.length,
    verdict: c?.verdict ?? null,
    winner_knobs: record.winner?.knobs ?? null,
    speedup: c?.speedup ?? null,
    interval: c ? [c.low, c.high] : null,
    baseline_rates: c?.baseline_rates ?? null,
    winner_rates: c?.winner_rates ?? null,
    no_winner: record.no_winner?.reason ?? null,
    diff,
    // each trial as the tune recorded it: what it tried (knobs that differ from trial 0), why, and what it measured
    trial_table: record.trials.map((t) => ({
      index: t.index,
      changed: Object.fromEntries(Object.entries(t.knobs).filter(([k, v]) => record.trials[0]?.knobs[k] !== v)),
      purpose: t.purpose,
      end: t.end,
      samples_per_s: t.samples_per_s,
      data_wait_share: t.data_wait_share,
    })),
  };
  results.push(result);
  console.log(
    `round ${round}: exit ${r.status}, ${result.wall_s} s, ${result.verdict ?? "no verdict"}` +
      (result.speedup ? ` ×${result.speedup.toFixed(2)} (95 % ×${c.low.toFixed(2)}–×${c.high.toFixed(2)})` : "") +
      ` ${JSON.stringify(diff)}`,
  );
}

const report = {
  command: `node bench/first-run.bench.mjs ${args.join(" ")}`.trim(),
  commit,
  brim_commit: `${commit}${dirty ? "+" : ""}`,
  measured_at: new Date().toISOString(),
  machine: { cpu: cpus()[0]?.model, cores: cpus().length, node: process.version, gpu: "none (CPU mode, RAM cap)" },
  beside: busy ? "one core kept busy by another process in its own session (node -e 'for(;;){}', detached) for the whole round" : "nothing started beside it",
  note: "Rounds after the first reuse node_modules and the build; the venv step runs only where no Python with PyTorch is on the PATH.",
  rounds: results,
};
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
console.log(`wrote ${out}`);
