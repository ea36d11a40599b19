#!/usr/bin/env node
// The fault soak: every fault of the reliability suite (test/reliability/) injected --repeat times
// through real processes, and the totals that matter: jobs left orphaned or unguarded, steps lost,
// files torn, stack traces, end causes and exit codes. Writes bench/results/faults.json.
// Run `npm run build` first (the suite drives the built CLI).
// Usage: node bench/faults.bench.mjs [--repeat 10]
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, platform, release, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..");
const at = process.argv.indexOf("--repeat");
const repeat = at > 0 ? Math.max(1, Number(process.argv[at + 1])) : 10;
const work = mkdtempSync(join(tmpdir(), "brim-faults-bench-"));
const out = join(work, "outcomes.ndjson");
writeFileSync(out, "");

const started = Date.now();
const vitest = spawnSync("npx", ["vitest", "run", "test/reliability", "--reporter=dot"], {
  cwd: repo,
  env: { ...process.env, BRIM_FAULT_REPEAT: String(repeat), BRIM_FAULT_OUT: out },
  encoding: "utf8",
  timeout: 30 * 60_000,
});
const seconds = (Date.now() - started) / 1000;
const outcomes = readFileSync(out, "utf8")
  .split("\n")
  .filter((line) => line !== "")
  .map((line) => JSON.parse(line));
rmSync(work, { recursive: true, force: true });

const byFault = {};
for (const o of outcomes) {
  const f = (byFault[o.fault] ??= {
    injected: 0,
    orphans: 0,
    unguarded: 0,
    torn: 0,
    stack_traces: 0,
    steps_reported: 0,
    steps_lost: 0,
    end_causes: {},
    exit_codes: {},
  });
  f.injected++;
  f.orphans += o.orphans;
  f.unguarded += o.unguarded;
  f.torn += o.torn;
  f.stack_traces += o.stackTrace ? 1 : 0;
  f.steps_reported += o.stepsReported ?? 0;
  f.steps_lost += o.stepsLost ?? 0;
  f.end_causes[String(o.endCause)] = (f.end_causes[String(o.endCause)] ?? 0) + 1;
  f.exit_codes[String(o.exitCode)] = (f.exit_codes[String(o.exitCode)] ?? 0) + 1;
}
const sum = (key) => Object.values(byFault).reduce((total, f) => total + f[key], 0);
const result = {
  bench: "faults",
  command: `node bench/faults.bench.mjs --repeat ${repeat}`,
  date: new Date().toISOString(),
  host: { cpus: cpus().length, cpu: cpus()[0]?.model ?? null, platform: `${platform()} ${release()}`, node: process.version },
  repeat,
  seconds: Math.round(seconds),
  suite_passed: vitest.status === 0,
  totals: {
    faults_injected: outcomes.length,
    jobs_orphaned: sum("orphans"),
    jobs_left_unguarded: sum("unguarded"),
    files_torn: sum("torn"),
    stack_traces: sum("stack_traces"),
    steps_reported: sum("steps_reported"),
    steps_lost: sum("steps_lost"),
  },
  faults: byFault,
  note: "steps_lost counts only the steps faults (SIGHUP: target 0; SIGKILL of brim: at most its last 250 ms flush interval). Disk-full faults run only where `unshare -rm` can mount a tmpfs.",
};
mkdirSync(join(here, "results"), { recursive: true });
writeFileSync(join(here, "results", "faults.json"), `${JSON.stringify(result, null, 2)}\n`);
console.log(JSON.stringify(result.totals, null, 2));
if (vitest.status !== 0) {
  console.error(vitest.stdout.slice(-4000));
  process.exitCode = 1;
}
