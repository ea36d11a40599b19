#!/usr/bin/env node
// Fits the planner's GPU- and framework-dependent memory constants (CUDA context, cuDNN workspace,
// allocator slack) to the measured peaks of the campaign's plan-accuracy pairs, by weighted least
// squares on relative error, and prints the error of the plan before and after.
//
//   node bench/gpu/fit-constants.mjs [files or folders ...] [--source spec|profile] [--target tree|reserved]
//                                    [--include-quick] [--json] [--write fit.json]
//
// Default input: every bench/results/gpu/*/plan-accuracy.jsonl. The model, per pair:
//   measured ≈ static + dynamic + context + cublas_ws + uses_cudnn × cudnn_ws + slack × dynamic
// where static = weights + gradients + optimizer state and dynamic = activations + input + temporaries
// come from the plan's components (they do not depend on the constants). cuBLAS's workspace is
// PyTorch's documented default and cannot be told apart from the context (every model has it), so
// it stays fixed and the context absorbs any difference. Targets: median |error| ≤ 5 %, worst ≤ 10 %.
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const TARGETS = { median: 0.05, worst: 0.1 };
const MiB = 2 ** 20;

function parseArgs(argv) {
  const opts = { inputs: [], source: "spec", target: "tree", includeQuick: false, json: false, write: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--source") opts.source = argv[++i];
    else if (a === "--target") opts.target = argv[++i];
    else if (a === "--include-quick") opts.includeQuick = true;
    else if (a === "--json") opts.json = true;
    else if (a === "--write") opts.write = argv[++i];
    else if (a === "--help" || a === "-h") {
      process.stdout.write(readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n").slice(1, 14).map((l) => l.replace(/^\/\/ ?/, "")).join("\n") + "\n");
      process.exit(0);
    } else if (a.startsWith("--")) throw new Error(`unknown option ${a}`);
    else opts.inputs.push(a);
  }
  if (!["spec", "profile"].includes(opts.source)) throw new Error(`--source: spec or profile, not ${opts.source}`);
  if (!["tree", "reserved"].includes(opts.target)) throw new Error(`--target: tree or reserved, not ${opts.target}`);
  return opts;
}

/** plan-accuracy.jsonl files named, or found in the folders named (recursively). */
function inputFiles(inputs) {
  const roots = inputs.length > 0 ? inputs : [join(REPO, "bench", "results", "gpu")];
  const files = [];
  const walk = (p) => {
    if (!existsSync(p)) return;
    if (statSync(p).isDirectory()) for (const name of readdirSync(p).sort()) walk(join(p, name));
    else if (p.endsWith(".jsonl") && (inputs.includes(p) || p.endsWith("plan-accuracy.jsonl"))) files.push(p);
  };
  roots.forEach(walk);
  return files;
}

function readRecords(file) {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim().startsWith("{"))
    .flatMap((l) => {
      try {
        return [JSON.parse(l)];
      } catch {
        return [];
      }
    });
}

/** The pairs a fit can use, each reduced to what the model needs; and why the others were left out. */
export function usablePairs(records, { source = "spec", target = "tree", includeQuick = false } = {}) {
  const latest = new Map();
  for (const r of records) if (r.part === "plan-accuracy") latest.set(`${r.machine?.gpus?.[0]?.name ?? "cpu"}|${r.key}`, r);
  const pairs = [];
  const skipped = {};
  const skip = (why) => (skipped[why] = (skipped[why] ?? 0) + 1);
  for (const r of latest.values()) {
    const plan = r.predicted?.[source];
    const m = r.measured ?? {};
    const y = target === "tree" ? m.peak_tree_gpu_bytes : m.framework_peak_reserved_bytes;
    if (!r.ok) skip("failed run");
    else if (r.quick && !includeQuick) skip("quick (CPU smoke) record");
    else if (r.precision_in_force && r.precision_in_force !== r.precision) skip("precision fell back");
    else if ((m.oom_recoveries ?? 0) > 0) skip("out-of-memory recovery split the micro-batch");
    else if (typeof y !== "number" || y <= 0) skip(`no measured ${target} peak`);
    else if (!plan?.components || !plan.assumptions) skip(`no ${source} plan`);
    // brim plans a precision the profile lacks from another one's numbers: not a test of the profile
    else if (source === "profile" && r.profile?.per_sample?.saved_bytes?.[r.precision] === undefined) skip("profile did not measure this precision");
    else {
      const c = plan.components;
      const constant = (name) => plan.assumptions.find((a) => a.name === name)?.value;
      const cublas = constant("cublas_workspace_bytes");
      const cudnn = constant("cudnn_workspace_bytes");
      const staticBytes = c.weights + c.gradients + c.optimizer_state;
      const dynamic = c.activations + c.input_batch + c.temporaries;
      pairs.push({
        key: r.key,
        job: r.job,
        precision: r.precision,
        micro_batch: r.micro_batch,
        measured: y,
        planned: plan.peak_bytes,
        base: staticBytes + dynamic,
        dynamic,
        uses_cudnn: c.workspace > cublas ? 1 : 0,
        old: { cuda_context_bytes: constant("cuda_context_bytes"), cublas_workspace_bytes: cublas, cudnn_workspace_bytes: cudnn, allocator_slack_fraction: constant("allocator_slack_fraction") },
        gpu: plan.gpu?.id ?? null,
        reserved: m.framework_peak_reserved_bytes ?? null,
        tree: m.peak_tree_gpu_bytes ?? null,
      });
    }
  }
  return { pairs, skipped };
}

/** Solves A x = b (small, dense) by Gaussian elimination with partial pivoting; null if singular. */
function solve(A, b) {
  const n = b.length;
  const M = A.map((row, i) => [...row, b[i]]);
  for (let col = 0; col < n; col++) {
    let pivot = col;
    for (let r = col + 1; r < n; r++) if (Math.abs(M[r][col]) > Math.abs(M[pivot][col])) pivot = r;
    if (Math.abs(M[pivot][col]) < 1e-12 * Math.max(1, ...M.map((row) => Math.abs(row[col])))) return null;
    [M[col], M[pivot]] = [M[pivot], M[col]];
    for (let r = 0; r < n; r++) {
      if (r === col) continue;
      const f = M[r][col] / M[col][col];
      for (let k = col; k <= n; k++) M[r][k] -= f * M[col][k];
    }
  }
  return M.map((row, i) => row[n] / row[i]);
}

/**
 * Weighted least squares of y on the named columns (weights 1/measured²: relative error). Bytes are
 * taken in GiB so the normal equations stay well scaled; `unit` turns a coefficient back.
 */
function leastSquares(pairs, columns, target) {
  const G = 2 ** 30;
  const A = columns.map(() => columns.map(() => 0));
  const b = columns.map(() => 0);
  for (const p of pairs) {
    const w = 1 / (p.measured / G) ** 2;
    const x = columns.map((col) => col.value(p));
    const y = target(p) / G;
    for (let i = 0; i < x.length; i++) {
      b[i] += w * x[i] * y;
      for (let j = 0; j < x.length; j++) A[i][j] += w * x[i] * x[j];
    }
  }
  const sol = solve(A, b);
  return sol && Object.fromEntries(columns.map((col, i) => [col.name, sol[i] * (col.unit ?? 1)]));
}

/**
 * Fits context (+ the fixed cuBLAS workspace), the cuDNN workspace and the slack fraction. A term
 * the data cannot determine (no cuDNN model, or no cuDNN-free one; no spread in dynamic memory)
 * keeps its old value; a negative estimate is set to 0 and the rest fitted again.
 */
export function fitConstants(pairs, { target = "tree" } = {}) {
  if (pairs.length === 0) return null;
  const old = pairs[0].old;
  const cudnnSeen = new Set(pairs.map((p) => p.uses_cudnn));
  const dyn = pairs.map((p) => p.dynamic);
  const spread = Math.max(...dyn) - Math.min(...dyn) > 0.01 * Math.max(...pairs.map((p) => p.measured));
  const fixed = { cudnn: cudnnSeen.size < 2 ? old.cudnn_workspace_bytes : null, slack: spread ? null : old.allocator_slack_fraction };
  // target "reserved": the allocator's own view, without the context outside it
  const outside = target === "tree";
  for (let round = 0; round < 3; round++) {
    const columns = [{ name: "fixed_bytes", value: () => 1, unit: 2 ** 30 }];
    if (fixed.cudnn === null) columns.push({ name: "cudnn", value: (p) => p.uses_cudnn, unit: 2 ** 30 });
    if (fixed.slack === null) columns.push({ name: "slack", value: (p) => p.dynamic / 2 ** 30 });
    const rest = (p) => p.measured - p.base - (fixed.cudnn ?? 0) * p.uses_cudnn - (fixed.slack ?? 0) * p.dynamic;
    const sol = leastSquares(pairs, columns, rest);
    if (sol === null) return null;
    if (fixed.cudnn === null && sol.cudnn < 0) {
      fixed.cudnn = 0;
      continue;
    }
    if (fixed.slack === null && sol.slack < 0) {
      fixed.slack = 0;
      continue;
    }
    const cudnn = fixed.cudnn ?? sol.cudnn;
    const slack = fixed.slack ?? sol.slack;
    const constants = {
      cuda_context_bytes: outside ? Math.round(sol.fixed_bytes - old.cublas_workspace_bytes) : 0,
      cublas_workspace_bytes: outside ? old.cublas_workspace_bytes : Math.round(sol.fixed_bytes),
      cudnn_workspace_bytes: Math.round(cudnn),
      allocator_slack_fraction: slack,
    };
    return { constants, determined: { cudnn_workspace_bytes: fixed.cudnn === null, allocator_slack_fraction: fixed.slack === null }, fixed_bytes: sol.fixed_bytes };
  }
  return null;
}

/** The plan's peak for a pair under other constants. */
export function predictWith(p, k) {
  return p.base + k.cuda_context_bytes + k.cublas_workspace_bytes + p.uses_cudnn * k.cudnn_workspace_bytes + k.allocator_slack_fraction * p.dynamic;
}

function errorStats(errors) {
  const abs = errors.map(Math.abs).sort((a, b) => a - b);
  if (abs.length === 0) return { n: 0, median_abs: null, worst_abs: null, mean: null };
  const mid = abs.length >> 1;
  const median = abs.length % 2 ? abs[mid] : (abs[mid - 1] + abs[mid]) / 2;
  return { n: abs.length, median_abs: median, worst_abs: abs.at(-1), mean: errors.reduce((a, e) => a + e, 0) / errors.length };
}

/** Before/after errors, per job too, and the fit left out one job at a time (how well it carries over). */
export function evaluate(pairs, fit, { target = "tree" } = {}) {
  const before = pairs.map((p) => (target === "tree" ? (p.planned - p.measured) / p.measured : null)).filter((e) => e !== null);
  const after = pairs.map((p) => (predictWith(p, fit.constants) - p.measured) / p.measured);
  const jobs = [...new Set(pairs.map((p) => p.job))];
  const heldOut = [];
  if (jobs.length > 2) {
    for (const job of jobs) {
      const rest = pairs.filter((p) => p.job !== job);
      const f = fitConstants(rest, { target });
      if (f) for (const p of pairs.filter((q) => q.job === job)) heldOut.push((predictWith(p, f.constants) - p.measured) / p.measured);
    }
  }
  const perJob = Object.fromEntries(
    jobs.map((job) => {
      const mine = pairs.filter((p) => p.job === job);
      return [job, { before: errorStats(mine.map((p) => (p.planned - p.measured) / p.measured)), after: errorStats(mine.map((p) => (predictWith(p, fit.constants) - p.measured) / p.measured)) }];
    }),
  );
  const a = errorStats(after);
  return {
    before: target === "tree" ? errorStats(before) : null,
    after: a,
    held_out_job: heldOut.length > 0 ? errorStats(heldOut) : null,
    per_job: perJob,
    meets_targets: a.median_abs !== null && a.median_abs <= TARGETS.median && a.worst_abs <= TARGETS.worst,
    targets: TARGETS,
  };
}

/** The memory outside PyTorch's allocator as measured, without a model: NVML tree − max reserved. */
function directContext(pairs) {
  const d = pairs.filter((p) => typeof p.tree === "number" && typeof p.reserved === "number").map((p) => p.tree - p.reserved).sort((a, b) => a - b);
  const mid = d.length >> 1;
  return { n: d.length, context_outside_allocator_median_bytes: d.length === 0 ? null : d.length % 2 ? d[mid] : (d[mid - 1] + d[mid]) / 2 };
}

const pct = (x) => (x === null || x === undefined ? "—" : `${(x * 100).toFixed(1)} %`);
const mib = (x) => `${(x / MiB).toFixed(0)} MiB`;

function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`fit-constants: ${error.message}\n`);
    process.exit(2);
  }
  const files = inputFiles(opts.inputs);
  const records = files.flatMap(readRecords);
  const { pairs, skipped } = usablePairs(records, opts);
  const fit = fitConstants(pairs, opts);
  const result = {
    schema: "brim.constants-fit/v1",
    inputs: files.map((f) => relative(REPO, f)),
    source: opts.source,
    target: opts.target,
    pairs: pairs.length,
    skipped,
    old: pairs[0]?.old ?? null,
    fit,
    evaluation: fit ? evaluate(pairs, fit, opts) : null,
    direct: directContext(pairs),
    calibration: fit
      ? {
          id: `${[...new Set(pairs.map((p) => p.gpu))].join("+")}-measured`,
          matches: [...new Set(pairs.map((p) => p.gpu).filter(Boolean))],
          constants: opts.target === "tree" ? { cuda_context_bytes: fit.constants.cuda_context_bytes, cudnn_workspace_bytes: fit.constants.cudnn_workspace_bytes, allocator_slack_fraction: fit.constants.allocator_slack_fraction } : {},
          source: `${files.map((f) => relative(REPO, f)).join(", ")}: ${pairs.length} pairs, fitted by bench/gpu/fit-constants.mjs`,
        }
      : null,
  };
  if (opts.write) writeFileSync(opts.write, JSON.stringify(result, null, 2) + "\n");
  if (opts.json) {
    process.stdout.write(JSON.stringify(result, null, 2) + "\n");
  } else if (!fit) {
    const why = pairs.length === 0 ? "no usable pairs" : `the ${pairs.length} usable pairs do not determine the constants`;
    process.stdout.write(`fit-constants: ${why} in ${files.length} file(s) (left out: ${JSON.stringify(skipped)})\n`);
  } else {
    const e = result.evaluation;
    const k = fit.constants;
    const o = result.old;
    const tree = opts.target === "tree";
    const lines = [
      `${pairs.length} pairs from ${files.length} file(s), plan from the ${opts.source}, measured ${tree ? "process-tree peak (NVML)" : "PyTorch max reserved"}; skipped: ${JSON.stringify(skipped)}`,
      tree ? `cuda_context_bytes        ${mib(o.cuda_context_bytes)} -> ${mib(k.cuda_context_bytes)}` : `fixed bytes inside the allocator: ${mib(k.cublas_workspace_bytes)} (no context in this view)`,
      `cudnn_workspace_bytes     ${mib(o.cudnn_workspace_bytes)} -> ${mib(k.cudnn_workspace_bytes)}${fit.determined.cudnn_workspace_bytes ? "" : " (not determined by these pairs: kept)"}`,
      `allocator_slack_fraction  ${o.allocator_slack_fraction} -> ${k.allocator_slack_fraction.toFixed(4)}${fit.determined.allocator_slack_fraction ? "" : " (not determined by these pairs: kept)"}`,
      ...(tree ? [`cublas_workspace_bytes    ${mib(k.cublas_workspace_bytes)} (fixed: PyTorch's default, folded into the context)`] : []),
      ...(result.direct.context_outside_allocator_median_bytes !== null ? [`measured directly: NVML tree peak − PyTorch max reserved, median ${mib(result.direct.context_outside_allocator_median_bytes)} over ${result.direct.n} pairs`] : []),
      `error          median |e|   worst |e|`,
      `before         ${pct(e.before?.median_abs).padEnd(12)} ${pct(e.before?.worst_abs)}`,
      `after          ${pct(e.after.median_abs).padEnd(12)} ${pct(e.after.worst_abs)}`,
      `held-out job   ${pct(e.held_out_job?.median_abs).padEnd(12)} ${pct(e.held_out_job?.worst_abs)}`,
      `targets (median ≤ ${pct(TARGETS.median)}, worst ≤ ${pct(TARGETS.worst)}): ${e.meets_targets ? "met" : "NOT met"}`,
      ...Object.entries(e.per_job).map(([job, s]) => `  ${job.padEnd(14)} before ${pct(s.before.median_abs)} / ${pct(s.before.worst_abs)}   after ${pct(s.after.median_abs)} / ${pct(s.after.worst_abs)}`),
    ];
    process.stdout.write(lines.join("\n") + "\n");
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
