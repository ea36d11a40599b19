// `brim plan -- <command>` (the plan made from running the script on this CPU-only machine) against
// the peaks recorded on a real H100: bench/results/gpu/nvidia-h100-80gb-hbm3/plan-accuracy.jsonl keeps,
// per example job × precision × micro-batch, the exact command the H100 ran and the measured peak of
// the job's process tree (NVML). Per (job, precision) this runs, once,
//
//   brim plan --json --gpu h100-sxm --knob precision=<p> --knob accumulation=1 [--knob stage=short] -- <python> <the record's command>
//
// (the same script, config overrides and knobs as the H100 run, its batch_size left to the config:
// the plan measures at the config's micro-batch and half of it), then predicts the peak at each
// recorded micro-batch from the profile that plan printed — `brim plan <profile> --gpu h100-sxm
// --precision <p> --batch <m> --optimizer <the plan's>`, the planner path `brim plan -- <command>`
// itself takes (checked: at the plan's own micro-batch both give the same peak). Per pair: error =
// (predicted − measured) / measured; per job and precision the median and worst; whether the plan's
// largest micro-batch would have fitted (the measured peaks' line through the recorded micro-batches,
// taken at that micro-batch, against the card). Every precision is also planned from the job's fp32
// run (`brim plan --precision <p>` with the job left in fp32: 16-bit activations modelled as half of
// fp32) — the other way to ask on a CPU, whose autocast is not CUDA's (`error_from_fp32_run`).
// It also runs the plan on the CPU for the commands of
// bench/results/gpu-checks/nvidia-h100-80gb-hbm3/plan/*.json (the same plan made on the H100 host) and compares the two fits.
// Needs `npm run build` first. Runs under `nice`; about 15 minutes on 2 shared cores.
//
//   node bench/plan-script-h100.bench.mjs [--only nbeats,cnn-lstm] [--no-issue-checks] [--out bench/results/plan-script-h100.json]
//
// Python: BRIM_BENCH_PYTHON (default the repository's .venv).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";

const repo = resolve(import.meta.dirname, "..");
const args = process.argv.slice(2);
if (args.includes("--help") || args.includes("-h")) {
  // the usage is this file's header: nothing runs, no record is rewritten
  const header = readFileSync(new URL(import.meta.url), "utf8").split("\n");
  process.stdout.write(
    `${header
      .slice(
        0,
        header.findIndex((l) => !l.startsWith("//")),
      )
      .map((l) => l.replace(/^\/\/ ?/, ""))
      .join("\n")}\n`,
  );
  process.exit(0);
}
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1] : fallback;
};
const out = resolve(option("out", join(repo, "bench", "results", "plan-script-h100.json")));
const only = option("only", null)?.split(",");
const PYTHON = process.env.BRIM_BENCH_PYTHON ?? join(repo, ".venv", "bin", "python");
const GPU_DIR = "bench/results/gpu/nvidia-h100-80gb-hbm3";
const PAIRS = `${GPU_DIR}/plan-accuracy.jsonl`;
const ISSUE_CHECKS = "bench/results/gpu-checks/nvidia-h100-80gb-hbm3/plan";
const GPU = "h100-sxm";
const BRIM = join(repo, "bin", "brim.js");
const store = mkdtempSync(join(tmpdir(), "brim-plan-h100-"));
const git = (a) => spawnSync("git", a, { cwd: repo, encoding: "utf8" }).stdout?.trim() ?? "";
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? null : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const worst = (xs) => xs.reduce((w, x) => (w === null || Math.abs(x) > Math.abs(w) ? x : w), null);
const round = (x, d = 4) => (x === null || x === undefined ? null : Math.round(x * 10 ** d) / 10 ** d);
const tail = (text) =>
  text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .slice(-8);

function brim(argv, timeoutMs = 1_800_000) {
  const t0 = Date.now();
  const r = spawnSync("nice", ["-n", "5", process.execPath, BRIM, ...argv], { cwd: repo, encoding: "utf8", timeout: timeoutMs, maxBuffer: 64 * 2 ** 20 });
  return { status: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? "", wall_s: Math.round((Date.now() - t0) / 100) / 10 };
}

/** `brim plan -- <command>`; the command as the record gives it, its python replaced by ours. */
function planScript(command, knobs) {
  const knobArgs = Object.entries(knobs).flatMap(([k, v]) => ["--knob", `${k}=${v}`]);
  const argv = ["plan", "--json", "--gpu", GPU, "--store", store, ...knobArgs, "--", PYTHON, ...command.slice(1)];
  const r = brim(argv);
  const shown = ["brim", ...argv.filter((a, i) => a !== "--store" && argv[i - 1] !== "--store")].map((a) => (a === PYTHON ? "python" : a));
  if (r.status !== 0) return { command: shown, wall_s: r.wall_s, error: tail(r.stderr).at(-1) ?? `exit ${r.status}`, stderr_tail: tail(r.stderr) };
  return { command: shown, wall_s: r.wall_s, plan: JSON.parse(r.stdout) };
}

/** The peak the script plan's profile gives at one micro-batch and precision (the planner `brim plan -- <command>` calls). */
function peakAt(profilePath, plan, precision, micro) {
  const argv = ["plan", profilePath, "--gpu", GPU, "--precision", precision, "--batch", String(micro), "--effective-batch", String(micro)];
  const r = brim([...argv, "--optimizer", plan.optimizer, "--json"], 120_000);
  if (r.status !== 0) return { error: tail(r.stderr).at(-1) ?? `exit ${r.status}` };
  const report = JSON.parse(r.stdout);
  return { peak_bytes: report.memory.peak_bytes, components: report.memory.components, max_micro_batch: report.max_micro_batch };
}

const fitDigest = (p) => ({
  method: p.fit.method,
  points: p.fit.points.map((x) => ({ micro_batch: x.micro_batch, saved_bytes: x.saved_bytes, recurrent: x.recurrent ?? null, autocast: x.autocast })),
  saved_per_sample_bytes: Math.round(p.fit.saved_per_sample_bytes),
  saved_fixed_bytes: Math.round(p.fit.saved_fixed_bytes),
  input_per_sample_bytes: Math.round(p.fit.input_per_sample_bytes),
});

/** Least squares peak = a + b × micro-batch through the measured pairs. */
function line(points) {
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  const sxx = points.reduce((s, p) => s + (p.x - mx) ** 2, 0);
  const b = sxx === 0 ? 0 : points.reduce((s, p) => s + (p.x - mx) * (p.y - my), 0) / sxx;
  return { fixed_bytes: my - b * mx, per_sample_bytes: b };
}

const records = readFileSync(join(repo, PAIRS), "utf8")
  .split("\n")
  .filter((l) => l.trim() !== "")
  .map((l) => JSON.parse(l))
  .filter((r) => r.ok && r.measured?.peak_tree_gpu_bytes > 0 && (!only || only.includes(r.job)));
const cardBytes = records[0]?.machine?.gpus?.[0]?.total_bytes ?? null;
const groups = new Map();
for (const r of records) {
  const key = `${r.job}|${r.precision}`;
  if (!groups.has(key)) groups.set(key, []);
  groups.get(key).push(r);
}

const rows = [];
const plans = [];
const profileDir = mkdtempSync(join(tmpdir(), "brim-plan-h100-profiles-"));
try {
  /** Would the plan's largest micro-batch have fitted: the measured peaks' line through the recorded micro-batches, taken there. */
  const largestCheck = (plan, precision, pairs) => {
    const g = plan.gpus[0];
    const measuredLine = line(pairs.map((r) => ({ x: r.micro_batch, y: r.measured.peak_tree_gpu_bytes })));
    const largest = g.largest[precision] ?? null;
    const atLargest = largest === null ? null : measuredLine.fixed_bytes + measuredLine.per_sample_bytes * largest;
    return {
      predicted: largest,
      budget_bytes: g.gpu.budget_bytes,
      card_bytes: cardBytes,
      measured_line: { fixed_bytes: Math.round(measuredLine.fixed_bytes), per_sample_bytes: Math.round(measuredLine.per_sample_bytes) },
      measured_peak_at_predicted_bytes: atLargest === null ? null : Math.round(atLargest),
      extrapolated: largest !== null && largest > Math.max(...pairs.map((r) => r.micro_batch)),
      share_of_card: atLargest === null || cardBytes === null ? null : round(atLargest / cardBytes),
      would_fit: atLargest === null || cardBytes === null ? null : atLargest <= cardBytes,
    };
  };
  // per job, its fp32 run (the records list fp32 first): every precision is also planned from it, as
  // `brim plan --precision <p> -- <command>` with the job left in fp32 plans it (16-bit modelled)
  const fp32Runs = new Map();
  for (const [key, pairs] of groups) {
    const [job, precision] = key.split("|");
    const first = pairs[0];
    const command = first.command.slice(first.command.indexOf("--") + 1);
    // the H100 run's knobs but its micro-batch: the plan measures at the config's and predicts the rest
    const knobs = Object.fromEntries(Object.entries(first.knobs).filter(([k]) => k !== "batch_size"));
    const made = planScript(command, knobs);
    const base = fp32Runs.get(job) ?? null;
    const entry = { job, precision, command: made.command, h100_command: first.command_line, wall_s: made.wall_s };
    let p = null;
    let profilePath = null;
    if (made.error) {
      console.log(`${key}: the plan failed: ${made.error}`);
      plans.push({ ...entry, error: made.error, stderr_tail: made.stderr_tail, largest_from_fp32_run: base && largestCheck(base.plan, precision, pairs) });
    } else {
      p = made.plan;
      const g = p.gpus[0];
      profilePath = join(profileDir, `${job}-${precision}.json`);
      writeFileSync(profilePath, JSON.stringify(p.profile));
      if (precision === "fp32") fp32Runs.set(job, { plan: p, profilePath });
      // the same planner the script plan used, asked at the plan's own micro-batch: both must agree
      const own = peakAt(profilePath, p, g.yours.precision, p.yours.micro_batch);
      plans.push({
        ...entry,
        yours: p.yours,
        optimizer: `${p.optimizer_classes.join(",")} → ${p.optimizer}`,
        fit: fitDigest(p),
        components_at_yours: g.components,
        check_same_planner: {
          at_micro_batch: p.yours.micro_batch,
          script_plan_peak_bytes: g.yours.peak_bytes,
          profile_plan_peak_bytes: own.peak_bytes ?? null,
          equal: own.peak_bytes === g.yours.peak_bytes,
        },
        largest: largestCheck(p, precision, pairs),
        largest_from_fp32_run: precision === "fp32" || base === null ? null : largestCheck(base.plan, precision, pairs),
        notes: p.notes,
        // the fp32 run's profile: bench/gpu/plan-validation.mjs plans every precision from it, leave-one-job-out
        ...(precision === "fp32" ? { profile: p.profile } : {}),
      });
    }
    for (const r of pairs.sort((a, b) => a.micro_batch - b.micro_batch)) {
      const measured = r.measured.peak_tree_gpu_bytes;
      const at = p === null ? { error: made.error } : peakAt(profilePath, p, precision, r.micro_batch);
      const fromFp32 = precision === "fp32" ? at : base === null ? { error: "no fp32 run" } : peakAt(base.profilePath, base.plan, precision, r.micro_batch);
      const err = (x) => (x.peak_bytes === undefined ? null : round((x.peak_bytes - measured) / measured));
      rows.push({
        job,
        precision,
        micro_batch: r.micro_batch,
        measured_peak_bytes: measured,
        measured_framework_reserved_bytes: r.measured.framework_peak_reserved_bytes,
        measured_framework_allocated_bytes: r.measured.framework_peak_allocated_bytes,
        predicted_peak_bytes: at.peak_bytes ?? null,
        error: err(at),
        predicted_components: at.components ?? null,
        plan_error: at.error ?? null,
        // the job measured in fp32, planned for this precision (16-bit activations modelled as half)
        predicted_from_fp32_run_bytes: fromFp32.peak_bytes ?? null,
        error_from_fp32_run: err(fromFp32),
        h100_run: r.run_id,
      });
    }
    const list = rows.filter((x) => x.job === job && x.precision === precision);
    const show = (k) => list.map((x) => (x[k] === null ? "—" : `${(x[k] * 100).toFixed(1)}%`)).join(", ");
    console.log(`${key}: plan ${made.wall_s} s; errors ${show("error")}; from the fp32 run ${show("error_from_fp32_run")}`);
  }

  // the same plan made on the H100 host (issue checks) against this CPU's, for the same command
  const issueChecks = [];
  if (!args.includes("--no-issue-checks")) {
    for (const name of ["cnn-lstm", "embedder", "lstm-transformer"]) {
      if (only && !only.includes(name)) continue;
      const gpuPlan = JSON.parse(readFileSync(join(repo, ISSUE_CHECKS, `${name}.json`), "utf8"));
      const made = planScript(gpuPlan.command, {});
      if (made.error) {
        issueChecks.push({ name, error: made.error, stderr_tail: made.stderr_tail });
        continue;
      }
      const cpu = made.plan;
      const side = (p) => ({
        fit: fitDigest(p),
        yours: p.yours,
        yours_peak_bytes: p.gpus.find((x) => x.gpu.id === GPU)?.yours.peak_bytes ?? null,
        activations_bytes: p.gpus.find((x) => x.gpu.id === GPU)?.components.activations ?? null,
        temporaries_bytes: p.gpus.find((x) => x.gpu.id === GPU)?.components.temporaries ?? null,
        largest: p.gpus.find((x) => x.gpu.id === GPU)?.largest ?? null,
      });
      const [a, b] = [side(gpuPlan), side(cpu)];
      issueChecks.push({
        name,
        gpu_record: `${ISSUE_CHECKS}/${name}.json`,
        cpu_command: made.command,
        cpu_wall_s: made.wall_s,
        measured_on_h100: a,
        measured_on_cpu: b,
        cpu_over_gpu: {
          saved_per_sample: round(b.fit.saved_per_sample_bytes / a.fit.saved_per_sample_bytes),
          yours_peak: round(b.yours_peak_bytes / a.yours_peak_bytes),
          largest: Object.fromEntries(Object.keys(a.largest ?? {}).map((k) => [k, a.largest[k] ? round((b.largest?.[k] ?? 0) / a.largest[k]) : null])),
        },
      });
      console.log(`issue check ${name}: saved per sample CPU/H100 ×${issueChecks.at(-1).cpu_over_gpu.saved_per_sample}`);
    }
  }

  const summarise = (list, field = "error") => {
    const errs = list.filter((x) => x[field] !== null && x[field] !== undefined).map((x) => x[field]);
    return {
      pairs: errs.length,
      median_abs_error: round(median(errs.map(Math.abs))),
      worst_error: worst(errs),
      median_error: round(median(errs)),
      under_by_more_than_3pct: errs.filter((e) => e < -0.03).length,
    };
  };
  const perGroup = [...groups.keys()].map((key) => {
    const [job, precision] = key.split("|");
    const planned = plans.find((x) => x.job === job && x.precision === precision);
    const list = rows.filter((x) => x.job === job && x.precision === precision);
    return {
      job,
      precision,
      ...summarise(list),
      largest: planned?.largest ?? null,
      from_fp32_run: { ...summarise(list, "error_from_fp32_run"), largest: planned?.largest_from_fp32_run ?? planned?.largest ?? null },
    };
  });
  const fits = (key) => {
    const known = perGroup.map((x) => key(x)?.would_fit).filter((v) => v === true || v === false);
    return `${known.filter((v) => v).length} of ${known.length}`;
  };
  const jobs = [...new Set(rows.map((x) => x.job))];
  const report = {
    schema: "brim.bench-plan-script-h100/v1",
    command: `node bench/plan-script-h100.bench.mjs ${args.join(" ")}`.trim(),
    commit: `${git(["rev-parse", "--short", "HEAD"])}${git(["status", "--porcelain", "--", "src", "python", "bin"]) ? "+dirty" : ""}`,
    date: new Date().toISOString(),
    machine: {
      cpus: cpus().length,
      cpu: cpus()[0]?.model ?? null,
      node: process.version,
      gpu: "none (CPU-only host): predictions made here, peaks measured on the H100",
    },
    python:
      spawnSync(PYTHON, ["-c", "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__)"], { encoding: "utf8" }).stdout?.trim() ?? null,
    measured: {
      record: PAIRS,
      gpu: records[0]?.machine?.gpus?.[0]?.name ?? null,
      torch: records[0]?.versions?.torch ?? null,
      peak: "peak_tree_gpu_bytes (NVML, the job's process tree)",
    },
    summary: {
      // each precision measured in that precision (its own --knob precision=<p> run, under CPU autocast)
      all: summarise(rows),
      per_job: Object.fromEntries(jobs.map((j) => [j, summarise(rows.filter((x) => x.job === j))])),
      per_precision: Object.fromEntries(["fp32", "bf16-mixed", "fp16-mixed"].map((p) => [p, summarise(rows.filter((x) => x.precision === p))])),
      largest_would_fit: fits((x) => x.largest),
      // every precision planned from the job's fp32 run
      from_fp32_run: {
        all: summarise(rows, "error_from_fp32_run"),
        per_job: Object.fromEntries(
          jobs.map((j) => [
            j,
            summarise(
              rows.filter((x) => x.job === j),
              "error_from_fp32_run",
            ),
          ]),
        ),
        per_precision: Object.fromEntries(
          ["fp32", "bf16-mixed", "fp16-mixed"].map((p) => [
            p,
            summarise(
              rows.filter((x) => x.precision === p),
              "error_from_fp32_run",
            ),
          ]),
        ),
        largest_would_fit: fits((x) => x.from_fp32_run.largest),
      },
      per_job_precision: perGroup,
      same_planner_checks_equal: plans.every((x) => x.error || x.check_same_planner.equal),
    },
    plans,
    rows,
    issue_checks: issueChecks,
  };
  writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
  const s = report.summary.all;
  const f = report.summary.from_fp32_run.all;
  console.log(
    `${s.pairs} pairs: median |error| ${(s.median_abs_error * 100).toFixed(1)} %, worst ${(s.worst_error * 100).toFixed(1)} %, ${s.under_by_more_than_3pct} under by > 3 %; largest would fit ${report.summary.largest_would_fit}`,
  );
  console.log(
    `from the fp32 runs, ${f.pairs} pairs: median |error| ${(f.median_abs_error * 100).toFixed(1)} %, worst ${(f.worst_error * 100).toFixed(1)} %, ${f.under_by_more_than_3pct} under by > 3 %; largest would fit ${report.summary.from_fp32_run.largest_would_fit}; written to ${out}`,
  );
} finally {
  rmSync(store, { recursive: true, force: true });
  rmSync(profileDir, { recursive: true, force: true });
}
