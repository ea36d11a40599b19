#!/usr/bin/env node
// Fits the planner's GPU- and framework-dependent memory constants (CUDA context, cuBLAS and cuDNN
// fixed bytes, allocator slack, cuDNN conv/rnn workspace factors) to the measured peaks of the
// campaign's plan-accuracy pairs, by least squares on relative error, with the planner's current
// memory model (src/plan/validation.ts), and prints the error of the plan before and after.
//
//   node bench/gpu/fit-constants.mjs [files or folders ...] [--source spec|profile]
//                                    [--include-quick] [--json] [--write calibration.json]
//
// Default input: every bench/results/gpu/*/plan-accuracy.jsonl. The fit's output (with its inputs,
// the command and the commit) is what src/plan/calibrations.ts ships; a test keeps them equal.
// Targets: median |error| ≤ 5 %, worst ≤ 10 %.
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { commitOf, DEFAULT_CONSTANTS, inputFiles, pairs as pairsOf, readRecords, rel, validation } from "./lib/plan-pairs.mjs";

const TARGETS = { median: 0.05, worst: 0.1 };
const MiB = 2 ** 20;
const CONSTANTS = [
  "cuda_context_bytes",
  "cublas_workspace_bytes",
  "cudnn_workspace_bytes",
  "allocator_slack_fraction",
  "conv_workspace_factor",
  "rnn_workspace_factor",
];

function parseArgs(argv) {
  const opts = { inputs: [], source: "spec", includeQuick: false, json: false, write: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--source") opts.source = argv[++i];
    else if (a === "--include-quick") opts.includeQuick = true;
    else if (a === "--json") opts.json = true;
    else if (a === "--write") opts.write = argv[++i];
    else if (a === "--help" || a === "-h") {
      process.stdout.write(
        readFileSync(fileURLToPath(import.meta.url), "utf8")
          .split("\n")
          .slice(1, 12)
          .map((l) => l.replace(/^\/\/ ?/, ""))
          .join("\n") + "\n",
      );
      process.exit(0);
    } else if (a.startsWith("--")) throw new Error(`unknown option ${a}`);
    else opts.inputs.push(a);
  }
  if (!["spec", "profile"].includes(opts.source)) throw new Error(`--source: spec or profile, not ${opts.source}`);
  return opts;
}

function perJob(pairs, constants) {
  const jobs = [...new Set(pairs.map((p) => p.job))];
  return Object.fromEntries(
    jobs.map((job) => [
      job,
      validation.accuracy(
        validation.errorsOf(
          pairs.filter((p) => p.job === job),
          constants,
        ),
      ),
    ]),
  );
}

/** The machine and versions the records were measured with (the first record's). */
function measuredOn(records) {
  const r = records.find((x) => x.part === "plan-accuracy" && x.ok && !x.quick) ?? {};
  const v = r.run_versions ?? r.versions ?? {};
  return {
    gpu: r.machine?.gpus?.[0]?.name ?? null,
    compute_capability: r.machine?.gpus?.[0]?.compute_capability ?? null,
    driver: r.machine?.driver ?? null,
    cuda: v.cuda ?? r.machine?.cuda ?? null,
    torch: v.torch ?? null,
    cudnn: v.cudnn === undefined ? null : String(v.cudnn),
  };
}

export function fitReport(files, opts, argv) {
  const records = files.flatMap(readRecords);
  const { pairs, skipped } = pairsOf(files, opts.source, { includeQuick: opts.includeQuick });
  const constants = validation.fitConstants(pairs);
  const before = pairs.length > 0 ? validation.accuracy(validation.errorsOf(pairs, {})) : null;
  const inSample = constants ? validation.accuracy(validation.errorsOf(pairs, constants)) : null;
  const heldOut = constants ? validation.accuracy(validation.leaveOneJobOutErrors(pairs)) : null;
  const outside = pairs
    .map((p) => p.outside_allocator)
    .filter((x) => typeof x === "number")
    .sort((a, b) => a - b);
  return {
    schema: "brim.constants-fit/v2",
    command: ["node", "bench/gpu/fit-constants.mjs", ...argv].join(" "),
    commit: commitOf(),
    inputs: files.map(rel),
    source: opts.source,
    target: "tree",
    pairs: pairs.length,
    skipped,
    measured_on: pairs.length > 0 ? measuredOn(records) : null,
    fit: constants ? { constants } : null,
    direct: {
      n: outside.length,
      outside_allocator_min_bytes: outside[0] ?? null,
      outside_allocator_max_bytes: outside.at(-1) ?? null,
    },
    evaluation: constants
      ? {
          before,
          in_sample: inSample,
          leave_one_job_out: heldOut,
          per_job: perJob(pairs, constants),
          targets: TARGETS,
          meets_targets: heldOut.median_abs_error !== null && heldOut.median_abs_error <= TARGETS.median && heldOut.worst_abs_error <= TARGETS.worst,
        }
      : null,
  };
}

const pct = (x) => (x === null || x === undefined ? "—" : `${(x * 100).toFixed(1)} %`);
const show = (name, v) => (name.endsWith("_bytes") ? `${(v / MiB).toFixed(0)} MiB` : v.toFixed(4));

function main() {
  const argv = process.argv.slice(2);
  let opts;
  try {
    opts = parseArgs(argv);
  } catch (error) {
    process.stderr.write(`fit-constants: ${error.message}\n`);
    process.exit(2);
  }
  const files = inputFiles(opts.inputs);
  const result = fitReport(files, opts, argv);
  if (opts.write) writeFileSync(opts.write, JSON.stringify(result, null, 2) + "\n");
  if (opts.json) {
    process.stdout.write(JSON.stringify(result, null, 2) + "\n");
    return;
  }
  if (!result.fit) {
    const why = result.pairs === 0 ? "no usable pairs" : `the ${result.pairs} usable pairs do not determine the constants`;
    process.stdout.write(`fit-constants: ${why} in ${files.length} file(s) (left out: ${JSON.stringify(result.skipped)})\n`);
    return;
  }
  const e = result.evaluation;
  const k = result.fit.constants;
  const lines = [
    `${result.pairs} pairs from ${files.length} file(s), plan from the ${opts.source}, measured process-tree peak (NVML); skipped: ${JSON.stringify(result.skipped)}`,
    ...CONSTANTS.map((name) => `${name.padEnd(26)}${show(name, DEFAULT_CONSTANTS[name])} -> ${show(name, k[name])}`),
    `measured directly: NVML tree peak − PyTorch max reserved ${show("x_bytes", result.direct.outside_allocator_min_bytes)}–${show("x_bytes", result.direct.outside_allocator_max_bytes)} over ${result.direct.n} pairs`,
    `error                 median |e|   worst |e|   under > 3 %`,
    `before (defaults)     ${pct(e.before.median_abs_error).padEnd(12)} ${pct(e.before.worst_abs_error).padEnd(11)} ${pct(e.before.under_3pct_share)}`,
    `after, in-sample      ${pct(e.in_sample.median_abs_error).padEnd(12)} ${pct(e.in_sample.worst_abs_error).padEnd(11)} ${pct(e.in_sample.under_3pct_share)}`,
    `leave-one-job-out     ${pct(e.leave_one_job_out.median_abs_error).padEnd(12)} ${pct(e.leave_one_job_out.worst_abs_error).padEnd(11)} ${pct(e.leave_one_job_out.under_3pct_share)}`,
    `targets, leave-one-job-out (median ≤ ${pct(TARGETS.median)}, worst ≤ ${pct(TARGETS.worst)}): ${e.meets_targets ? "met" : "NOT met"}`,
    ...Object.entries(e.per_job).map(([job, s]) => `  ${job.padEnd(14)} in-sample ${pct(s.median_abs_error)} / ${pct(s.worst_abs_error)}`),
  ];
  process.stdout.write(lines.join("\n") + "\n");
}

main();
