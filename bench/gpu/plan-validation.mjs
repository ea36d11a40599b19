#!/usr/bin/env node
// The plan's accuracy on the recorded GPU pairs, with the planner's current code: in-sample
// (constants fitted to every pair) and leave-one-job-out (constants fitted to four jobs predict the
// fifth), from the bundled spec and from the SDK profile; and after one calibrating trial
// (leave-one-job-out constants, each job and precision re-anchored on one measured micro-batch).
// Where the folder has a `brim plan -- <command>` record made against it (the H100's:
// bench/results/plan-script-h100.json, from bench/plan-script-h100.bench.mjs), the script path too:
// each job planned from the profile its fp32 run measured on a CPU, every precision modelled from it.
//
//   node bench/gpu/plan-validation.mjs [gpu results folder] [--write plan-validation.json] [--json]
//
// Default folder: bench/results/gpu/nvidia-h100-80gb-hbm3. The file it writes (schema
// brim.plan-validation/v1) is read by the benchmarks generator; test/plan/validation.test.ts fails
// when the code's accuracy falls below the committed figures.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { commitOf, inputFiles, pairs as pairsOf, REPO, rel, validation } from "./lib/plan-pairs.mjs";

const TARGETS = { median_abs_error: 0.05, worst_abs_error: 0.1, under_3pct_share: 0.05, one_trial_median_abs_error: 0.03 };

export function planValidation(folder, argv) {
  const files = inputFiles([folder]);
  const results = [];
  const oneTrial = [];
  const keptOut = [];
  let sourceRecords = 0;
  const scriptProfiles = scriptProfilesFor(folder);
  for (const source of ["spec", "profile", ...(scriptProfiles === null ? [] : ["script"])]) {
    const { pairs } = pairsOf(files, source, { scriptProfiles: scriptProfiles ?? {} });
    if (source === "spec") sourceRecords = pairs.length;
    results.push(...validation.validate(pairs, source));
    keptOut.push(...validation.keptOut(pairs, source));
    oneTrial.push({ source, mode: "leave-one-job-out, one calibrating trial", ...validation.accuracy(validation.oneTrialErrors(pairs)) });
  }
  return {
    schema: "brim.plan-validation/v1",
    commit: commitOf(),
    command: ["node", "bench/gpu/plan-validation.mjs", ...argv].join(" "),
    source_records: files.map(rel),
    pairs_used: sourceRecords,
    targets: TARGETS,
    results,
    one_trial: oneTrial,
    // jobs whose leave-one-job-out errors a term of their own decides: no other job shows it, so held out it is fitted from nothing
    kept_out: keptOut,
  };
}

/** job → the profile of its fp32 script plan, from the script-path record made against this folder's pairs; null if none. */
function scriptProfilesFor(folder) {
  const record = join(REPO, "bench", "results", "plan-script-h100.json");
  if (!existsSync(record) || !resolve(folder).endsWith("nvidia-h100-80gb-hbm3")) return null;
  const plans = JSON.parse(readFileSync(record, "utf8")).plans ?? [];
  const profiles = Object.fromEntries(plans.filter((p) => p.precision === "fp32" && p.profile).map((p) => [p.job, p.profile]));
  return Object.keys(profiles).length > 0 ? profiles : null;
}

function main() {
  const argv = process.argv.slice(2);
  let folder = join(REPO, "bench", "results", "gpu", "nvidia-h100-80gb-hbm3");
  let write = null;
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--write") write = argv[++i];
    else if (a === "--json") json = true;
    else if (a.startsWith("--")) {
      process.stderr.write(`plan-validation: unknown option ${a}\n`);
      process.exit(2);
    } else folder = a;
  }
  const report = planValidation(folder, argv);
  if (write) writeFileSync(write, JSON.stringify(report, null, 2) + "\n");
  if (json) {
    process.stdout.write(JSON.stringify(report, null, 2) + "\n");
    return;
  }
  const pct = (x) => (x === null ? "—" : `${(x * 100).toFixed(1)} %`);
  const rows = [...report.results, ...report.one_trial].map(
    (r) =>
      `${r.source.padEnd(8)} ${r.mode.padEnd(50)} ${String(r.pairs).padStart(5)}  ${pct(r.median_abs_error).padStart(8)}  ${pct(r.worst_abs_error).padStart(8)}  ${pct(r.under_3pct_share).padStart(8)}`,
  );
  const kept = report.kept_out.map(
    (k) =>
      `${k.source}: ${k.job} is kept out by ${k.terms.join(" and ")} (no other job has it): ${k.pairs} pairs, median ${pct(k.median_error)}, worst ${pct(k.worst_error)}`,
  );
  process.stdout.write([`source   mode${" ".repeat(47)}pairs    median     worst  under>3%`, ...rows, "", ...kept].join("\n") + "\n");
}

main();
