#!/usr/bin/env node
// Writes BENCHMARKS.md (and its charts) from the records under bench/results/ — never typed by hand.
// Every figure is recomputed from the raw records; each part says on which machine, at which brim
// commit and with which command it was measured, and whether code it measures changed since (git).
// Output is deterministic (no clock, no locale): `--check` regenerates in memory and exits 1 with a
// summary of the differences when the committed files are stale.
// Usage: node scripts/benchmarks.mjs [--check] [--out-dir <dir>] [--root <repo>]   (npm run benchmarks)
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

let ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = "bench/results";
const MiB = 2 ** 20;
const GiB = 2 ** 30;
const GPU_PARTS = ["plan-accuracy", "guard", "tune", "utilization", "overhead"];
const CHART_DIR = "docs/bench";

// What each part measures: a commit after the record's that touches one of these paths makes the
// part's figures stale until it is measured again.
const SOURCES = {
  "plan-accuracy": [
    "src/plan",
    "src/cli/plan.ts",
    "src/devices",
    "src/record/summary.ts",
    "python/brim/torch/_profile.py",
    "bench/gpu/profile_example.py",
    "bench/gpu/lib/plan-accuracy.mjs",
    "bench/gpu/lib/jobs.mjs",
    "examples",
  ],
  "plan-validation": ["src/plan", "src/cli/plan.ts", "bench/gpu/fit-constants.mjs"],
  guard: ["src/guard", "src/job", "src/cli/run.ts", "src/devices", "src/record/summary.ts", "python/brim", "bench/gpu/lib/guard.mjs", "examples/nbeats"],
  tune: [
    "src/tune",
    "src/knobs",
    "src/job",
    "src/cli/tune.ts",
    "src/devices",
    "src/record/summary.ts",
    "python/brim",
    "bench/gpu/lib/tune.mjs",
    "bench/gpu/lib/jobs.mjs",
    "examples",
  ],
  utilization: ["src/devices", "src/record", "src/job", "python/brim", "bench/gpu/lib/utilization.mjs", "bench/gpu/lib/jobs.mjs", "examples"],
  overhead: ["src/devices", "src/record", "src/job", "src/guard", "src/cli/run.ts", "python/brim", "bench/gpu/lib/overhead.mjs", "examples"],
  "sampler-cpu.json": ["src/devices", "bench/sampler.bench.mjs"],
  "search-sim.json": ["src/tune", "src/knobs", "bench/search-sim.bench.mjs"],
  "tune-strategies.json": [
    "src/tune",
    "src/knobs",
    "src/job",
    "python/brim",
    "test/jobs/oracle_job.py",
    "examples/ppo",
    "examples/nbeats",
    "bench/tune-strategies.bench.mjs",
  ],
  "overhead-parts.json": [
    "src/devices",
    "src/record",
    "src/job",
    "src/guard",
    "src/cli/run.ts",
    "python/brim",
    "test/jobs/manual_sgd.py",
    "bench/overhead-parts.bench.py",
  ],
  // brim's own code, and the corpus itself (its entries, configs and pinned packages) with its bench
  "tune-corpus.json": ["src", "python/brim", "bin", "corpus", "bench/tune-corpus.bench.mjs"],
  "first-run.json": ["src", "python/brim", "bin", "scripts/first-run.sh", "examples/cnn-lstm", "bench/first-run.bench.mjs"],
  // the README's two commands on a fresh clone: everything they run
  "fresh-machine.json": ["src", "python", "bin", "scripts", "examples/cnn-lstm", "test", "package.json", "package-lock.json", ".ci", "vitest.config.ts"],
  // the example run plainly (no brim): only the example and the bench decide it
  "cpu-threads.json": ["examples/cnn-lstm", "bench/cpu-threads.bench.mjs"],
  "loss-read.json": ["python/brim/_loss.py", "python/brim/_attach.py", "python/brim/_tracking.py", "bench/loss-read.bench.py"],
  // the prediction side: the H100 peaks it is compared with are fixed records
  "plan-script-h100.json": [
    "src/plan",
    "src/plan/measure/script.ts",
    "src/cli/plan.ts",
    "src/tune/tune.ts",
    "src/configs",
    "python/brim/_footprint.py",
    "python/brim/torch/_step.py",
    "examples",
    "bench/plan-script-h100.bench.mjs",
  ],
  // the plan of unmodified scripts: the measuring runs, the knobs they vary, the footprint capture and the planner
  "plan-script.json": [
    "src/plan",
    "src/plan/measure/script.ts",
    "src/knobs",
    "src/configs",
    "python/brim/_footprint.py",
    "python/brim/_code.py",
    "examples",
    "corpus",
    "bench/plan-script.bench.mjs",
  ],
  "run-overhead.json": ["src/devices", "src/record", "src/job", "src/guard", "src/cli/run.ts", "python/brim", "examples", "bench/run-overhead.bench.mjs"],
};
const NOT_RECORDS = new Set(["README.md", "campaign.log", "detect.txt", "detect.json", "machine.json"]);

class Failure extends Error {}

// ---------- small helpers ----------
const fmt = (v, d = 1) => (typeof v === "number" && Number.isFinite(v) ? v.toFixed(d) : "—");
const pct = (v, d = 1) => (typeof v === "number" && Number.isFinite(v) ? `${(v * 100).toFixed(d)} %` : "—");
const gib = (b, d = 2) => (typeof b === "number" ? `${(b / GiB).toFixed(d)} GiB` : "—");
const mib = (b) => (typeof b === "number" ? `${Math.round(b / MiB)} MiB` : "—");
const code = (s) => "`" + String(s).replace(/`/g, "'") + "`";
const table = (head, rows) => [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
const xml = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);
function median(xs) {
  const s = xs.filter((x) => typeof x === "number" && Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
const uniq = (xs) => [...new Set(xs)];
/** "2026-11-22 14:57–15:06 UTC" from two ISO times (the date once when both share it). */
const span = (a, b) =>
  a.slice(0, 10) === b.slice(0, 10)
    ? `${a.slice(0, 10)} ${a.slice(11, 16)}–${b.slice(11, 16)} UTC`
    : `${a.slice(0, 16).replace("T", " ")}–${b.slice(0, 16).replace("T", " ")} UTC`;
/** A record's command as a shell line, with the environment it set. */
const commandLine = (r) =>
  r.command_line
    ? `${Object.entries(r.env ?? {})
        .map(([k, v]) => `${k}=${v} `)
        .join("")}${r.command_line}`
    : null;
function readJsonLines(file) {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .flatMap((l) => {
      try {
        return [JSON.parse(l)];
      } catch {
        return []; // a cut-off last line of an interrupted call
      }
    });
}
/** The latest record per key, the campaign's own rule for which measurement counts. */
const latestByKey = (records) => [...new Map(records.filter((r) => r.quick !== true).map((r) => [r.key, r])).values()];

// ---------- git: which commit a record was made at, and what changed since ----------
function git(args) {
  const r = spawnSync("git", args, { cwd: ROOT, encoding: "utf8" });
  return r.status === 0 ? r.stdout.trim() : null;
}
function checkHistory() {
  if (git(["rev-parse", "--is-inside-work-tree"]) !== "true") throw new Failure("not a git checkout: the staleness of each part comes from git history");
  if (git(["rev-parse", "--is-shallow-repository"]) === "true")
    throw new Failure(
      "this clone is shallow: the staleness of each part needs the history since its records' commit (run `git fetch --unshallow`, or clone with full history: actions/checkout fetch-depth: 0)",
    );
}
/** A commit a record names ("abc1234", or "abc1234+dirty" from a working tree with changes) → { commit, how }. */
function namedCommit(raw, how) {
  const [, hex, dirty] = /^([0-9a-f]{7,40})(\+dirty)?$/.exec(String(raw)) ?? [null, null, null];
  if (!hex) return { commit: null, how: `${how}: ${code(raw)}, not a commit` };
  const full = git(["rev-parse", "--verify", "--quiet", `${hex}^{commit}`]);
  return { commit: full ?? hex, how: dirty ? `${how}, from a working tree with uncommitted changes` : how };
}
/** The commit a record file was made at: its own field, else the commit that last changed the file. */
function fileCommit(relPath) {
  const dirty = git(["status", "--porcelain", "--", relPath]);
  if (dirty) return { commit: null, how: "not committed yet: commit the record, then run `npm run benchmarks` again" };
  const c = git(["log", "-1", "--format=%H", "--", relPath]);
  return c ? { commit: c, how: `the commit that added or last changed ${code(relPath)}` } : { commit: null, how: "not in git history" };
}
function staleness(commit, paths) {
  if (!commit) return "Staleness unknown: no commit to compare with.";
  const out = git(["log", "--no-merges", "--format=%H%x09%as%x09%s", `${commit}..HEAD`, "--", ...paths]);
  if (out === null) return `Staleness unknown: commit ${commit.slice(0, 7)} is not in this repository's history (made on a branch rewritten since?).`;
  const lines = out.split("\n").filter(Boolean);
  const range = code(`git log ${commit.slice(0, 7)}..HEAD -- ${paths.join(" ")}`);
  if (lines.length === 0) return `**Current**: no commit after ${commit.slice(0, 7)} touches the code this part measures (${range}).`;
  // Only the first change is named, so that later commits leave this text (and the committed file) as it is.
  const [h, date, subject] = lines[lines.length - 1].split("\t");
  const first = `${h.slice(0, 7)} ${date} ${subject.length > 100 ? subject.slice(0, 99) + "…" : subject}`;
  return `**Stale**: recorded at ${commit.slice(0, 7)}; the code this part measures has changed since, first in ${first} (all of them: ${range}).`;
}

// ---------- the machine ----------
function gpuMachine(m, v) {
  const g = m?.gpus?.[0];
  const host = m?.host;
  return [
    g ? `${m.gpus.length} × ${g.name} (${gib(g.total_bytes, 1)})` : "no GPU",
    `driver ${m?.driver ?? "?"}`,
    `CUDA ${m?.cuda ?? "?"} (PyTorch built for ${v?.cuda ?? "?"}, cuDNN ${v?.cudnn ?? "?"})`,
    `PyTorch ${v?.torch ?? "?"}`,
    `Python ${v?.python ?? "?"}`,
    `Node ${v?.node ?? "?"}`,
    host ? `${host.cpus} CPUs (${host.cpu_model}), ${gib(host.mem_total_bytes, 0)} RAM` : "host ?",
    `brim ${v?.brim ?? "?"}`,
  ].join("; ");
}
function cpuMachine(r) {
  const m = r.machine ?? {};
  const cpus = m.cores ?? m.cpus ?? r.host?.cpus;
  const parts = [
    m.cpu ?? m.cpu_model,
    cpus !== undefined ? `${cpus} CPUs` : null,
    m.platform ?? (r.host ? `${r.host.platform} ${r.host.release}` : null),
    `Node ${m.node ?? r.node ?? "?"}`,
    m.gpu ? `GPU: ${m.gpu}` : r.gpus === 0 ? "no GPU" : null,
  ];
  return parts.filter(Boolean).join("; ") || "not recorded";
}

// ---------- GPU parts ----------
function planErrors(records, source, adjust = (p) => p) {
  return records.flatMap((r) => {
    const p = r.predicted?.[source];
    const m = r.measured?.peak_tree_gpu_bytes;
    if (!p || typeof p.peak_bytes !== "number" || typeof m !== "number" || m <= 0) return [];
    const predicted = adjust(p.peak_bytes, p, r);
    return [{ key: r.key, job: r.job, measured: m, predicted, error: (predicted - m) / m }];
  });
}
function errorRow(label, errs) {
  if (errs.length === 0) return [label, "0", "—", "—", "—"];
  const worst = errs.reduce((a, b) => (Math.abs(b.error) > Math.abs(a.error) ? b : a));
  const under = errs.filter((e) => e.error < -0.03).length;
  return [
    label,
    String(errs.length),
    pct(median(errs.map((e) => Math.abs(e.error)))),
    `${pct(Math.abs(worst.error))} (${code(worst.key)})`,
    `${under} of ${errs.length} (${pct(under / errs.length, 0)})`,
  ];
}

function planSection(dir, recs, chartPath) {
  const ok = recs.filter((r) => r.ok);
  const failed = recs.filter((r) => !r.ok);
  const spec = planErrors(ok, "spec");
  const prof = planErrors(ok, "profile");
  const outside = ok.map((r) => r.measured.peak_tree_gpu_bytes - r.measured.framework_peak_reserved_bytes).filter(Number.isFinite);
  const ctx = median(outside);
  const withCtx = (peak, p) => peak - (p.components?.cuda_context ?? 0) + ctx;
  const head = ["plan made from", "pairs", "median abs. error", "worst abs. error (pair)", "under-estimates > 3 %"];
  const lines = [
    `Predicted peak (\`brim plan\`) against the measured peak of the job's process tree (NVML), error = (predicted − measured) / measured; latest record per \`job|precision|micro-batch\`, ${ok.length} pairs ok, ${failed.length} failed.`,
    "",
    table(head, [
      errorRow("the bundled model spec, as recorded", spec),
      errorRow("the SDK's CPU profile, as recorded", prof),
      errorRow(`spec, CUDA context := ${mib(ctx)} (post hoc)`, planErrors(ok, "spec", withCtx)),
      errorRow(`profile, CUDA context := ${mib(ctx)} (post hoc)`, planErrors(ok, "profile", withCtx)),
    ]),
    "",
    `The post-hoc rows replace the plan's assumed CUDA context (${uniq(ok.map((r) => mib(r.predicted?.spec?.components?.cuda_context))).join(", ")}) with the median memory the pairs measured outside PyTorch's allocator (tree peak − reserved peak: ${mib(Math.min(...outside))}–${mib(Math.max(...outside))}, median ${mib(ctx)}). That number is taken from these same pairs: an in-sample what-if, not a prediction.`,
    "",
  ];
  const jobs = uniq(ok.map((r) => r.job));
  lines.push(
    table(
      ["job", "pairs", "spec: median / worst", "profile: median / worst"],
      jobs.map((j) => {
        const s = spec.filter((e) => e.job === j).map((e) => Math.abs(e.error));
        const p = prof.filter((e) => e.job === j).map((e) => Math.abs(e.error));
        return [
          j,
          String(s.length),
          `${pct(median(s))} / ${pct(s.length ? Math.max(...s) : null)}`,
          p.length ? `${pct(median(p))} / ${pct(Math.max(...p))}` : "no profile",
        ];
      }),
    ),
    "",
  );
  const profileErrors = uniq(ok.map((r) => r.predicted?.profile_error && `${r.job}: ${String(r.predicted.profile_error).split(". ")[0]}`).filter(Boolean));
  if (profileErrors.length) lines.push(`No profile plan where the profile could not be made: ${profileErrors.map(code).join("; ")}.`, "");
  if (failed.length) lines.push(`Failed pairs: ${failed.map((r) => `${code(r.key)} (${r.error})`).join("; ")}.`, "");
  if (spec.length + prof.length === 0) return { lines, svg: null };
  lines.push(`![predicted against measured peak](${chartPath})`, "");
  return { lines, svg: scatter(spec, prof, dir.split("/").pop()) };
}

/** bench/results/gpu/<gpu>/plan-validation.json (bench/gpu/fit-constants.mjs): the calibrated planner's errors. */
function validationBlock(dir) {
  const rel = `${dir}/plan-validation.json`;
  if (!existsSync(join(ROOT, rel)))
    return ["No `plan-validation.json` yet: the calibrated planner's in-sample and leave-one-job-out errors are not recorded.", ""];
  let v;
  try {
    v = JSON.parse(readFileSync(join(ROOT, rel), "utf8"));
  } catch {
    return [`#### Planner validation`, "", ...unknownRecord(rel)];
  }
  const c = v.commit ? namedCommit(v.commit, "its `commit`") : fileCommit(rel);
  return [
    `#### Planner validation: in-sample and leave-one-job-out`,
    "",
    `Computed at brim commit ${c.commit ? c.commit.slice(0, 7) : "?"} (${c.how}).`,
    "",
    staleness(c.commit, SOURCES["plan-validation"]),
    "",
    ...validationSection(v),
  ];
}

function validationSection(v) {
  const rows = (v.results ?? []).map((r) => [r.source, r.mode, String(r.pairs), pct(r.median_abs_error), pct(r.worst_abs_error), pct(r.under_3pct_share, 0)]);
  return [
    `From \`plan-validation.json\` (${v.schema ?? "no schema"}), written by ${code([].concat(v.command ?? "command not recorded").join(" "))}${v.source_records ? ` from ${[].concat(v.source_records).map(code).join(", ")}` : ""}:`,
    "",
    table(["plan from", "mode", "pairs", "median abs. error", "worst abs. error", "under-estimates > 3 %"], rows),
    "",
    ...keptOutSection(v.kept_out ?? []),
  ];
}

/** The jobs a term of their own keeps out of leave-one-job-out (no other recorded job shows it). */
function keptOutSection(kept) {
  if (kept.length === 0) return [];
  const signed = (x) => (x === null || x === undefined ? "—" : `${x >= 0 ? "+" : "−"}${(Math.abs(x) * 100).toFixed(1)} %`);
  return [
    "Kept out of the line above by a term of their own: no other recorded job has it, so with the job held out its factor is fitted from nothing.",
    "",
    table(
      ["plan from", "job", "its own term", "pairs", "median error", "worst error", "under-estimates > 3 %"],
      kept.map((k) => [k.source, k.job, k.terms.join(", "), String(k.pairs), signed(k.median_error), signed(k.worst_error), pct(k.under_3pct_share, 0)]),
    ),
    "",
  ];
}

function guardSection(recs) {
  const rows = recs.map((r) => {
    const s = r.summary ?? {};
    const c = r.checks ?? {};
    const events = (r.events ?? []).map((e) => e.event);
    return [
      code(r.case),
      r.cap,
      String(r.micro_batch),
      `${s.micro_batch ?? "?"} × ${s.accumulation ?? "?"}`,
      gib(r.predicted_unguarded_peak_bytes),
      gib(s.peak_tree_gpu_bytes ?? r.peak_bytes, 3),
      c.peak_under_cap ? "yes" : "**no**",
      String(s.oom_recoveries ?? "?"),
      `${s.steps ?? "?"} of ${r.step_budget}`,
      String((r.step_budget ?? 0) - (s.steps ?? 0)),
      c.ended_ok ? "ok" : "**not ok**",
      events.filter((e) => e !== "budget_reached").join(", ") || "—",
    ];
  });
  return [
    table(
      [
        "case",
        "cap",
        "micro-batch asked",
        "in force (micro × accum.)",
        "planned unguarded peak",
        "measured peak",
        "peak ≤ cap",
        "OOM recovered",
        "steps",
        "steps lost",
        "end",
        "events",
      ],
      rows,
    ),
    "",
  ];
}

function tuneSection(recs) {
  const by = new Map(recs.map((r) => [r.key, r]));
  const jobs = uniq(recs.map((r) => r.job));
  const knobs = (k) =>
    k ? `${k.batch_size ?? "?"}${k.accumulation > 1 ? `×${k.accumulation}` : ""} ${k.precision ?? ""}${k.num_workers ? ` w${k.num_workers}` : ""}`.trim() : "—";
  const rows = jobs.map((j) => {
    const b = by.get(`${j}|brim`);
    const g = by.get(`${j}|grid`);
    const bt = b?.ok ? b.tune : null;
    const gt = g?.ok ? g.tune : null;
    const gridCells = gridSize(g);
    const covered = gt ? uniq(gt.trials.map((t) => `${t.knobs.batch_size}|${t.knobs.precision}`)).length : null;
    const baseline = mean((bt?.trials ?? []).filter((t) => t.purpose === "baseline" && t.end === "ok").map((t) => t.samples_per_s));
    const share = bt?.winner && gt?.best_measured ? bt.winner.samples_per_s / gt.best_measured.samples_per_s : null;
    const noise =
      bt?.baseline?.samples_per_s && gt?.baseline?.samples_per_s
        ? Math.max(bt.baseline.samples_per_s, gt.baseline.samples_per_s) / Math.min(bt.baseline.samples_per_s, gt.baseline.samples_per_s) - 1
        : null;
    return [
      j,
      bt ? `${bt.trials_count}, ${fmt(bt.tune_wall_s, 0)} s, ${bt.stop_reason}` : b ? `failed: ${b.error}` : "not measured",
      bt?.winner ? `${knobs(bt.winner.knobs)}: ${fmt(bt.winner.samples_per_s, 0)}/s` : "—",
      bt?.winner && baseline ? `×${fmt(bt.winner.samples_per_s / baseline, 2)}` : "—",
      gt
        ? `${gt.trials_count}, ${fmt(gt.tune_wall_s, 0)} s, ${gt.stop_reason}; ${covered} of ${gridCells ?? "?"} cells`
        : g
          ? `failed: ${g.error}`
          : "not measured",
      gt?.best_measured ? `${knobs(gt.best_measured.knobs)}: ${fmt(gt.best_measured.samples_per_s, 0)}/s` : "—",
      pct(share, 0),
      bt && gt ? `${fmt(bt.baseline.samples_per_s, 0)} vs ${fmt(gt.baseline.samples_per_s, 0)} (${pct(noise, 0)})` : "—",
    ];
  });
  const grids = recs.filter((r) => r.ok && r.strategy === "grid");
  const cut = grids.filter((r) => uniq(r.tune.trials.map((t) => `${t.knobs.batch_size}|${t.knobs.precision}`)).length < (gridSize(r) ?? 0));
  return [
    "brim's search (`brim tune`) and a grid over micro-batch × precision (`brim tune --strategy grid`, loader settings fixed), each from the job's naive config. Share = brim's winner's samples/s over the best the grid measured; speed-up = brim's winner over its own trial 0 (the naive config). The two baselines are the same config measured twice: their gap is the run-to-run noise.",
    "",
    cut.length
      ? `The grid stopped at its time budget before measuring every cell in ${cut.length} of ${grids.length} jobs (${cut.map((r) => r.job).join(", ")}): its best is the best it measured, not the best there is, so a share above 100 % is possible. Trials run for about 10 steps each; the baseline gap above shows how far one trial's samples/s can move.`
      : "All grids measured every cell.",
    "",
    table(
      [
        "job",
        "brim: trials, wall, stop",
        "brim's winner",
        "speed-up over naive",
        "grid: trials, wall, stop; cells measured",
        "grid's best",
        "share of grid's best",
        "naive samples/s, brim vs grid run (gap)",
      ],
      rows,
    ),
    "",
  ];
}
/** The grid's cells: the product of the `--knob name=a,b,c` lists in its command. */
function gridSize(rec) {
  if (!rec?.command) return null;
  let n = 1;
  rec.command.forEach((a, i) => {
    if (rec.command[i - 1] === "--knob") n *= a.split("=")[1].split(",").length;
  });
  return n;
}

function utilizationSection(recs) {
  const by = new Map(recs.map((r) => [r.key, r]));
  const rows = [];
  for (const j of uniq(recs.map((r) => r.job))) {
    for (const phase of ["before", "after"]) {
      const r = by.get(`${j}|${phase}`);
      if (!r) continue;
      if (!r.ok) {
        rows.push([j, phase, `failed: ${r.error}`, "", "", "", "", "", "", ""]);
        continue;
      }
      const k = r.knobs ?? {};
      rows.push([
        j,
        phase,
        phase === "before" ? "naive config" : `batch ${k.batch_size} ${k.precision ?? ""}${k.accumulation ? ` accum ${k.accumulation}` : ""}`,
        String(r.steps),
        fmt(r.samples_per_s, 0),
        pct(r.gpu_util_mean / 100, 0),
        pct(r.sm_activity_mean / 100, 0),
        pct(r.data_wait_share, 0),
        fmt(r.power_mean_w, 0),
        gib(r.peak_tree_gpu_bytes),
      ]);
    }
  }
  const after = recs.filter((r) => r.ok && r.phase === "after");
  const range = (f) => (after.length ? `${pct(Math.min(...after.map(f)), 0)}–${pct(Math.max(...after.map(f)), 0)}` : "—");
  return [
    `After the tune's winner: NVML utilization ${range((r) => r.gpu_util_mean / 100)}, SM activity ${range((r) => r.sm_activity_mean / 100)}, the loop waiting for data ${range((r) => r.data_wait_share)} of step time.`,
    "",
    table(["job", "phase", "knobs", "steps", "samples/s", "GPU util (NVML)", "SM activity", "data wait", "power W", "peak"], rows),
    "",
  ];
}

function overheadSection(recs) {
  const rows = recs.map((r) => {
    if (!r.ok) return [r.job, `failed: ${r.error}`, "", "", "", ""];
    const of = (mode) => median((r.runs ?? []).filter((x) => x.mode === mode).map((x) => x.samples_per_s));
    const bare = of("bare");
    const brim = of("brim");
    return [r.job, String(r.pairs), fmt(bare, 1), fmt(brim, 1), fmt(brim / bare, 2), (r.pair_ratios ?? []).map((x) => fmt(x, 2)).join(", ")];
  });
  return [
    "Each job's naive config bare and under `brim run --hz 10`, interleaved; samples/s from the job's own last line. Ratio = median under brim / median bare (below 1: brim costs throughput).",
    "",
    table(["job", "pairs", "bare samples/s", "brim samples/s", "ratio", "per pair"], rows),
    "",
  ];
}

function commandsBlock(recs, max) {
  const lines = uniq(recs.map(commandLine).filter(Boolean));
  const shown = lines.slice(0, max);
  return [
    "<details><summary>commands (" + (shown.length < lines.length ? `${shown.length} of ${lines.length}` : lines.length) + ")</summary>",
    "",
    "```sh",
    ...shown,
    "```",
    "",
    "</details>",
    "",
  ];
}

function gpuFolder(dir, out) {
  const abs = join(ROOT, dir);
  const slug = dir.split("/").pop();
  const names = readdirSync(abs).sort();
  const machineFile = join(abs, "machine.json");
  const machine = existsSync(machineFile) ? JSON.parse(readFileSync(machineFile, "utf8")) : null;
  const readme = existsSync(join(abs, "README.md")) ? readFileSync(join(abs, "README.md"), "utf8") : "";
  const readmeCommit = /brim commit ([0-9a-f]{7,40})/.exec(readme)?.[1] ?? null;
  const invocation = /```sh\n([\s\S]*?)```/.exec(readme)?.[1].trim() ?? null;
  const lines = [`## GPU: ${machine?.machine?.gpus?.[0]?.name ?? slug} (\`${dir}\`)`, ""];
  if (machine) lines.push(`Machine (\`machine.json\`): ${gpuMachine(machine.machine, machine.versions)}.`, "");
  if (invocation)
    lines.push(`Campaign as its README records it (\`bench/gpu/run.sh\`, [docs/gpu-campaign.md](docs/gpu-campaign.md)):`, "", "```sh", invocation, "```", "");
  const commitOf = (recs) => {
    // a record without its own commit was made at the one the folder's README names
    const own = uniq(recs.map((r) => r.versions?.brim_commit ?? readmeCommit).filter(Boolean));
    if (own.length === 1) return namedCommit(own[0], own[0] === readmeCommit ? `${dir}/README.md` : "the records' `versions.brim_commit`");
    if (own.length > 1) {
      // the oldest commit decides whether the part is stale: every record must be current for it to be
      const oldest = own.find((c) => own.every((other) => other === c || git(["merge-base", "--is-ancestor", c, other]) !== null)) ?? own[0];
      const named = namedCommit(oldest, "");
      return {
        commit: named.commit,
        how: `records made at several commits (${own.map((c) => c.slice(0, 7)).join(", ")}), the oldest counted; measure the part again in one campaign`,
      };
    }
    return { commit: null, how: "not recorded" };
  };
  const header = (title, part, recs) => {
    const { commit, how } = commitOf(recs);
    const starts = recs
      .map((r) => r.started_at)
      .filter(Boolean)
      .sort();
    const machines = uniq(recs.map((r) => gpuMachine(r.machine, r.versions)));
    const sameMachine = machine && machines.length === 1 && machines[0] === gpuMachine(machine.machine, machine.versions);
    return [
      `### ${title}`,
      "",
      `Records: \`${dir}/${part}.jsonl\` (${recs.length}), measured ${starts.length ? span(starts[0], starts.at(-1)) : "?"} at brim commit ${commit ? commit.slice(0, 7) : "?"} (from ${how}); machine ${sameMachine ? "as above" : machines.join(" / ")}. Made by ${code(`bench/gpu/lib/${part}.mjs`)}.`,
      "",
      staleness(commit, SOURCES[part]),
      "",
    ];
  };
  const titles = {
    "plan-accuracy": "Planner accuracy",
    guard: "Guard: the cap and out-of-memory recovery",
    tune: "Tune against the grid",
    utilization: "Utilization before and after tuning",
    overhead: "Overhead: bare against `brim run`",
  };
  for (const part of GPU_PARTS) {
    const file = join(abs, `${part}.jsonl`);
    if (!existsSync(file)) {
      lines.push(
        `### ${titles[part]}`,
        "",
        `Not measured on this GPU yet (no \`${part}.jsonl\`).`,
        "",
        ...(part === "plan-accuracy" ? validationBlock(dir) : []),
      );
      continue;
    }
    const recs = latestByKey(readJsonLines(file));
    lines.push(...header(titles[part], part, recs));
    if (part === "plan-accuracy") {
      const chart = `${CHART_DIR}/${slug}-plan-scatter.svg`;
      const { lines: l, svg } = planSection(dir, recs, chart);
      if (svg) out.set(chart, svg);
      lines.push(
        ...l,
        ...commandsBlock(
          recs.flatMap((r) => [r, ...["plan_spec", "profile", "plan_profile"].map((k) => ({ command_line: r.commands?.[k]?.join(" ") }))]),
          6,
        ),
      );
    } else {
      const body = { guard: guardSection, tune: tuneSection, utilization: utilizationSection, overhead: overheadSection }[part](recs);
      lines.push(...body, ...commandsBlock(recs, 20));
    }
    if (part === "plan-accuracy") lines.push(...validationBlock(dir));
  }
  const extra = names.filter((n) => !NOT_RECORDS.has(n) && !GPU_PARTS.some((p) => n === `${p}.jsonl`) && n !== "plan-validation.json");
  if (extra.length) lines.push(`### Other records in \`${dir}\``, "", ...extra.flatMap((n) => unknownRecord(`${dir}/${n}`)));
  return lines;
}

// ---------- the scatter chart ----------
function scatter(spec, prof, title) {
  const W = 560,
    H = 440,
    L = 64,
    R = 16,
    T = 36,
    B = 52;
  const all = [...spec, ...prof].flatMap((e) => [e.measured, e.predicted]);
  const lo = 2 ** Math.floor(Math.log2(Math.min(...all) / GiB));
  const hi = 2 ** Math.ceil(Math.log2(Math.max(...all) / GiB));
  const sx = (b) => L + ((Math.log2(b / GiB) - Math.log2(lo)) / (Math.log2(hi) - Math.log2(lo))) * (W - L - R);
  const sy = (b) => H - B - ((Math.log2(b / GiB) - Math.log2(lo)) / (Math.log2(hi) - Math.log2(lo))) * (H - T - B);
  const n = (v) => v.toFixed(1);
  const el = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
  ];
  el.push(`<text x="${W / 2}" y="18" text-anchor="middle" font-size="13">brim plan: predicted vs measured peak, ${xml(title)}</text>`);
  for (let g = lo; g <= hi; g *= 2) {
    const label = String(g);
    el.push(
      `<line x1="${n(sx(g * GiB))}" y1="${T}" x2="${n(sx(g * GiB))}" y2="${H - B}" stroke="#eee"/>`,
      `<line x1="${L}" y1="${n(sy(g * GiB))}" x2="${W - R}" y2="${n(sy(g * GiB))}" stroke="#eee"/>`,
    );
    el.push(
      `<text x="${n(sx(g * GiB))}" y="${H - B + 14}" text-anchor="middle">${label}</text>`,
      `<text x="${L - 6}" y="${n(sy(g * GiB) + 4)}" text-anchor="end">${label}</text>`,
    );
  }
  el.push(`<line x1="${n(sx(lo * GiB))}" y1="${n(sy(lo * GiB))}" x2="${n(sx(hi * GiB))}" y2="${n(sy(hi * GiB))}" stroke="#888"/>`);
  for (const f of [0.9, 1.1])
    el.push(
      `<line x1="${n(sx(lo * GiB))}" y1="${n(sy(lo * GiB * f))}" x2="${n(sx((hi * GiB) / (f > 1 ? f : 1)))}" y2="${n(sy(hi * GiB * (f > 1 ? 1 : f)))}" stroke="#bbb" stroke-dasharray="4 3"/>`,
    );
  el.push(
    `<text x="${(L + W - R) / 2}" y="${H - 14}" text-anchor="middle">measured peak, process tree (GiB, log scale)</text>`,
    `<text transform="translate(16 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">predicted peak (GiB, log scale)</text>`,
  );
  for (const e of spec)
    el.push(
      `<circle cx="${n(sx(e.measured))}" cy="${n(sy(e.predicted))}" r="3.5" fill="#1f77b4" fill-opacity="0.7"><title>spec ${xml(e.key)}: ${(e.error * 100).toFixed(1)} %</title></circle>`,
    );
  for (const e of prof)
    el.push(
      `<circle cx="${n(sx(e.measured))}" cy="${n(sy(e.predicted))}" r="4" fill="none" stroke="#ff7f0e" stroke-width="1.5"><title>profile ${xml(e.key)}: ${(e.error * 100).toFixed(1)} %</title></circle>`,
    );
  el.push(`<circle cx="${L + 14}" cy="${T + 10}" r="3.5" fill="#1f77b4"/><text x="${L + 22}" y="${T + 14}">from the model spec (${spec.length})</text>`);
  el.push(
    `<circle cx="${L + 14}" cy="${T + 26}" r="4" fill="none" stroke="#ff7f0e" stroke-width="1.5"/><text x="${L + 22}" y="${T + 30}">from the SDK profile (${prof.length})</text>`,
  );
  el.push(`<text x="${L + 14}" y="${T + 46}" fill="#888">solid: exact; dashed: ±10 %</text>`, "</svg>", "");
  return el.join("\n");
}

// ---------- CPU records ----------
function cpuFigures(name, r) {
  if (name === "loss-read.json" && r.loops)
    return [
      `The read alone (keep the loss at backward, take it at the step's end, read its value), in process, best of 7: ${fmt(r.read_alone_us_per_step, 2)} µs a step.` +
        (r.tiny_alternating_in_process
          ? ` The tiny loop in one attached process, the read on and off in alternating blocks of 2,000 steps: ${fmt(r.tiny_alternating_in_process.median_loss_read_us, 1)} vs ${fmt(r.tiny_alternating_in_process.median_loss_off_us, 1)} µs/step (${fmt(r.tiny_alternating_in_process.loss_read_cost_us_per_step, 1)} µs).`
          : ""),
      "",
      table(
        ["loop", "steps", "µs/step, loss read", "µs/step, BRIM_LOSS=0", "cost µs/step", "throughput ratio read / off", "per-round ratios"],
        Object.entries(r.loops).map(([k, l]) => [
          k,
          String(l.steps),
          fmt(l.median_loss_read_us, 1),
          fmt(l.median_loss_off_us, 1),
          fmt(l.loss_read_cost_us_per_step, 1),
          fmt(l.throughput_ratio, 3),
          (l.throughput_ratio_per_round ?? []).map((x) => fmt(x, 3)).join(", "),
        ]),
      ),
      "",
    ];
  if (name === "sampler-cpu.json" && r.read_latency_ms)
    return [
      `${fmt(r.readings_per_s, 2)} readings/s at ${r.hz} Hz over ${fmt(r.wall_s, 1)} s (${r.skipped_ticks} skipped ticks, ${r.errors} errors); the sampler used ${fmt(r.sampler_cpu_percent_of_core, 2)} % of one core (idle baseline ${fmt(r.idle_baseline_cpu_percent_of_core, 2)} %), ${fmt(r.cpu_ms_per_reading, 2)} ms CPU per reading; read latency p50 ${fmt(r.read_latency_ms.p50, 2)} ms, p95 ${fmt(r.read_latency_ms.p95, 2)} ms, max ${fmt(r.read_latency_ms.max, 2)} ms.`,
      "",
    ];
  if (name === "run-overhead.json" && r.examples)
    return [
      table(
        [
          "job",
          "steps",
          "bare samples/s",
          "brim samples/s",
          "median pair ratio brim / bare",
          "90 % interval",
          "job CPU brim / bare",
          "brim's process past start, % of a core",
        ],
        Object.entries(r.examples).map(([k, e]) => [
          k,
          String(e.steps ?? r.steps ?? "?"),
          (e.bare_samples_per_s ?? []).join(", "),
          (e.brim_samples_per_s ?? []).join(", "),
          fmt(e.throughput_ratio_brim_over_bare ?? median(e.brim_samples_per_s ?? []) / median(e.bare_samples_per_s ?? []), 3),
          e.throughput_ratio_90_interval ? e.throughput_ratio_90_interval.map((x) => fmt(x, 3)).join("–") : "",
          e.job_cpu_ratio_brim_over_bare === undefined ? "" : fmt(e.job_cpu_ratio_brim_over_bare, 3),
          e.brim_process_cpu_percent_of_core_while_running === undefined ? "" : fmt(e.brim_process_cpu_percent_of_core_while_running, 1),
        ]),
      ),
      "",
    ];
  if (name === "tune-strategies.json" && r.jobs)
    return Object.entries(r.jobs).flatMap(([job, j]) => [
      `${job} (options ${code((j.tune_options ?? []).join(" "))}, grid ${(j.grid ?? []).join(", ")}):`,
      "",
      table(
        ["strategy", "trials", "wall s", "winner samples/s", "share of grid's best", "trials over the cap"],
        (j.results ?? []).map((x) => [
          x.strategy,
          String(x.trials),
          fmt(x.wall_s, 1),
          fmt(x.winner_samples_per_s, 1),
          pct(x.winner_share_of_grid_best, 1),
          String(x.over_cap_trials),
        ]),
      ),
      "",
    ]);
  if (name === "tune-corpus.json" && Array.isArray(r.entries)) return corpusFigures(r);
  if (name === "first-run.json" && Array.isArray(r.rounds)) return firstRunFigures(r);
  if (name === "cpu-threads.json" && Array.isArray(r.results)) return cpuThreadsFigures(r);
  if (name === "fresh-machine.json" && Array.isArray(r.commands)) return freshMachineFigures(r);
  if (name === "plan-script-h100.json" && r.summary?.per_job_precision) return planScriptH100Figures(r);
  if (name === "plan-script.json" && Array.isArray(r.rows)) return planScriptFigures(r);
  if (name === "search-sim.json" && Array.isArray(r.results)) {
    const keys = uniq(r.results.map((x) => `${x.noise}|${x.strategy}`));
    return [
      `${r.what ? `${r.what[0].toUpperCase()}${r.what.slice(1)}. ` : ""}${Object.keys(r.shapes ?? {}).length} curve shapes × ${r.seeds} seeds per noise level; across the shapes:`,
      "",
      table(
        [
          "noise",
          "strategy",
          "trials (mean over shapes)",
          "trials over the cap (mean)",
          "winner's true throughput, median of shape medians",
          "worst",
          "runs within 3 % of the best",
        ],
        keys.map((k) => {
          const xs = r.results.filter((x) => `${x.noise}|${x.strategy}` === k);
          const runs = xs.reduce((a, x) => a + x.runs, 0);
          return [
            ...k.split("|"),
            fmt(xs.reduce((a, x) => a + x.trials_mean, 0) / xs.length, 1),
            fmt(xs.reduce((a, x) => a + x.over_cap_trials_mean, 0) / xs.length, 2),
            `${fmt(median(xs.map((x) => x.reached_pct_median)), 1)} %`,
            `${fmt(Math.min(...xs.map((x) => x.reached_pct_min)), 1)} %`,
            pct(xs.reduce((a, x) => a + x.within_3pct_share * x.runs, 0) / runs, 0),
          ];
        }),
      ),
      "",
    ];
  }
  return null;
}

/** bench/plan-script.bench.mjs: `brim plan -- <command>` on every bundled example and corpus entry, per script. */
function planScriptFigures(r) {
  const n = (v) => (typeof v === "number" ? v.toLocaleString("en-US") : "—");
  const kib = (b) => (typeof b !== "number" ? "—" : b >= MiB ? `${(b / MiB).toFixed(2)} MiB` : `${(b / 1024).toFixed(1)} KiB`);
  const gpu = (row, id) => row.gpus?.find((g) => g.gpu === id) ?? null;
  const rows = r.rows.map((row) => {
    if (row.exit !== 0)
      return [
        code(row.name),
        "—",
        "—",
        `exit ${row.exit ?? "?"}: ${(row.stderr_tail ?? []).at(-1) ?? row.error ?? row.skipped ?? "?"}`,
        "—",
        "—",
        "—",
        "—",
        fmt(row.wall_s, 1),
      ];
    const fit = row.fit
      ? `${row.fit.method} ${row.fit.points.map((x) => x.micro_batch).join("/")}`
      : `per ${row.knob}: ${(row.stages ?? []).map((x) => x.value).join(", ")}`;
    const t4 = gpu(row, "t4");
    const h100 = gpu(row, "h100-sxm");
    return [
      code(row.name),
      n(row.params?.total),
      row.yours ? `${row.yours.micro_batch} × ${row.yours.accumulation}` : "—",
      fit,
      kib(row.fit?.saved_per_sample_bytes),
      n(t4?.largest?.fp32),
      n(h100?.largest?.["bf16-mixed"]),
      pct(t4?.yours_share),
      fmt(row.wall_s, 1),
    ];
  });
  return [
    `${r.passed} of ${r.rows.length} scripts planned for 3 GPUs or more (exit 0); the rest say why, in one line.`,
    "",
    table(
      [
        "script",
        "params",
        "micro-batch × acc.",
        "fit (micro-batches measured)",
        "saved / sample",
        "largest fp32 on T4",
        "largest bf16 on H100",
        "your config on T4",
        "wall s",
      ],
      rows,
    ),
    "",
  ];
}

/** bench/plan-script-h100.bench.mjs: `brim plan -- <command>` made on the CPU against the peaks measured on the H100. */
function planScriptH100Figures(r) {
  const a = r.summary.all;
  const f = r.summary.from_fp32_run;
  const signed = (v) => (typeof v === "number" ? `${v > 0 ? "+" : ""}${pct(v)}` : "—");
  const largest = (l) =>
    l?.predicted === null || l?.predicted === undefined
      ? "—"
      : `${l.predicted}: ${l.share_of_card === null ? "?" : pct(l.share_of_card, 0)}${l.would_fit ? "" : ", would not fit"}`;
  return [
    `Pairs of ${code(r.measured.record)} (${r.measured.gpu}, torch ${r.measured.torch}; peak: ${r.measured.peak}), predicted from \`brim plan -- <command>\` made on this CPU (${r.python}), the H100 run's command and knobs, one plan per job and precision. Each precision measured in that precision (its \`--knob precision=<p>\` run, under the CPU's autocast): ${a.pairs} pairs, median abs. error ${pct(a.median_abs_error)}, worst ${signed(a.worst_error)}, ${a.under_by_more_than_3pct} under by more than 3 %; the plan's largest micro-batch would have fitted the card (the measured peaks' line, taken there) ${r.summary.largest_would_fit}. Every precision planned from the job's fp32 run: ${f.all.pairs} pairs, median abs. error ${pct(f.all.median_abs_error)}, worst ${signed(f.all.worst_error)}, ${f.all.under_by_more_than_3pct} under by more than 3 %; largest would fit ${f.largest_would_fit}.`,
    "",
    table(
      [
        "job",
        "precision",
        "pairs",
        "median abs. error",
        "worst",
        "under > 3 %",
        "largest planned: measured line there, share of card",
        "from the fp32 run: median abs. error",
        "worst",
        "largest planned",
      ],
      r.summary.per_job_precision.map((x) => [
        x.job,
        x.precision,
        String(x.pairs),
        pct(x.median_abs_error),
        signed(x.worst_error),
        String(x.under_by_more_than_3pct),
        largest(x.largest),
        pct(x.from_fp32_run?.median_abs_error),
        signed(x.from_fp32_run?.worst_error),
        largest(x.from_fp32_run?.largest),
      ]),
    ),
    "",
    ...(r.issue_checks?.length
      ? [
          "The same plan measured on the H100 host (bench/results/gpu-checks/nvidia-h100-80gb-hbm3/plan) and on this CPU, for the same command:",
          "",
          table(
            [
              "example",
              "saved per sample, H100",
              "CPU",
              "CPU / H100",
              "your config's peak, CPU / H100",
              "largest fp32, H100 → CPU",
              "largest bf16-mixed, H100 → CPU",
            ],
            r.issue_checks
              .filter((x) => !x.error)
              .map((x) => [
                x.name,
                `${x.measured_on_h100.fit.saved_per_sample_bytes} B`,
                `${x.measured_on_cpu.fit.saved_per_sample_bytes} B`,
                fmt(x.cpu_over_gpu.saved_per_sample, 2),
                fmt(x.cpu_over_gpu.yours_peak, 3),
                `${x.measured_on_h100.largest?.fp32 ?? "—"} → ${x.measured_on_cpu.largest?.fp32 ?? "—"}`,
                `${x.measured_on_h100.largest?.["bf16-mixed"] ?? "—"} → ${x.measured_on_cpu.largest?.["bf16-mixed"] ?? "—"}`,
              ]),
          ),
          "",
        ]
      : []),
  ];
}

/** bench/first-run.bench.mjs: the README's first command, round by round, beside a busy core. */
/** scripts/fresh-machine.sh --record: the README's two commands on a fresh clone, each with its exit, time and what it printed last. */
function freshMachineFigures(r) {
  return [
    `A fresh clone at ${r.commit}, ${r.beside}, caches ${r.caches}; load ${fmt(r.machine?.load_1m_at_end, 2)} at the end.`,
    "",
    table(
      ["command", "exit", "wall s", "what it said"],
      r.commands.map((x) => [
        `\`${x.command}\``,
        String(x.exit_code),
        String(x.wall_s),
        [x.closing_line, ...(x.tune_lines ?? [])].filter(Boolean).join("; ") || "—",
      ]),
    ),
    "",
  ];
}

/** bench/cpu-threads.bench.mjs: the cnn-lstm example's samples/s by intra-op threads and loader workers, beside a busy core. */
function cpuThreadsFigures(r) {
  return [
    `${r.job}; ${r.beside}; ${r.machine?.torch ? `torch ${r.machine.torch.split(" ")[0]}` : ""}, load ${fmt(r.machine?.load_1m_at_end, 2)} at the end.`,
    "",
    table(
      ["intra-op threads", "loader workers", "samples/s (median)", "each round"],
      r.results.map((x) => [
        x.threads === null ? "default" : String(x.threads),
        String(x.workers),
        fmt(x.median, 1),
        x.samples_per_s.map((v) => fmt(v, 1)).join(", "),
      ]),
    ),
    "",
  ];
}

function firstRunFigures(r) {
  // the config lines the round's apply --dry-run would write: "+  num_workers: 8   # ..." → "num_workers: 8"
  const change = (x) =>
    (x.diff ?? [])
      .filter((l) => l.startsWith("+"))
      .map((l) => l.slice(1).split("#")[0].trim())
      .filter((l) => l !== "") // apply's own comment lines above a changed key
      .join(", ") || "—";
  return [
    `${r.beside ?? ""}. ${r.note ?? ""}`.trim(),
    "",
    table(
      ["round", "exit", "wall s", "verdict", "speedup", "95 % interval", "config change", "search trials", "load (1 min)"],
      r.rounds.map((x) => [
        String(x.round),
        String(x.exit_code),
        fmt(x.wall_s, 1),
        x.verdict ?? "—",
        x.speedup ? `×${fmt(x.speedup, 2)}` : "—",
        x.interval ? `×${fmt(x.interval[0], 2)}–×${fmt(x.interval[1], 2)}` : "—",
        change(x),
        String(x.search_trials),
        fmt(x.load_1m_at_end, 2),
      ]),
    ),
    "",
  ];
}

/** The tune's options of a corpus record: one line for all entries, or per call of a merged record when they differ. */
function tuneOptions(r) {
  const line = (c) => `\`brim tune --max-time ${c.tune_time_s}s${c.max_trials ? ` --max-trials ${c.max_trials}` : ""} -- <the entry's own command line>\``;
  const calls = (r.calls ?? []).filter((c) => c.tune_time_s !== undefined);
  if (calls.length < 2 || calls.every((c) => line(c) === line(calls[0]))) return `${line(r)} on each`;
  const groups = new Map();
  for (const c of calls) groups.set(line(c), [...(groups.get(line(c)) ?? []), ...c.entries]);
  return [...groups].map(([l, names]) => `${l} on ${names.join(", ")}`).join("; ");
}

/** bench/tune-corpus.bench.mjs: `brim run --steps N` and `brim tune` on each installed entry point of corpus/. */
function corpusFigures(r) {
  const es = r.entries;
  const tuned = es.filter((e) => e.tune);
  const count = (f) => tuned.filter(f).length;
  const knobs = (k) => {
    if (!k) return "—";
    const set = Object.entries(k).map(([n, v]) => `${n}=${v}`);
    return set.length ? set.join(" ") : "(as configured)";
  };
  const speedup = (t) => {
    const w = t.winner;
    if (!w) return "—";
    // the interleaved A/B confirmation tune.json keeps beside the winner (95 % interval)
    const c = t.more?.confirmation;
    const iv =
      c?.verdict === "confirmed" && c.low != null && c.high != null ? [c.low, c.high] : (w.interval ?? w.speedup_interval ?? w.confirmed?.interval ?? null);
    return `×${fmt(w.speedup, 2)}${Array.isArray(iv) ? ` (95 % ${iv.map((x) => `×${fmt(x, 2)}`).join("–")}, ${c?.baseline_rates?.length ?? "?"} pairs)` : ""}`;
  };
  const reason = (t) => {
    if (t.outcome === "winner") return "—";
    if (t.outcome.startsWith("winner is trial 0"))
      return t.knobs_varied.length === 0 ? "varied no knob, yet named trial 0 the winner" : "no configuration beat trial 0";
    const nw = t.more?.no_winner?.reason ?? t.closing_lines?.find((l) => /^no winner|^no gain|nothing to tune|no knob/.test(l));
    return nw ? String(nw).replace(/\|/g, "/").slice(0, 160) : (t.closing_lines?.at(-1) ?? "").replace(/\|/g, "/").slice(0, 160);
  };
  const run = (e) => {
    const x = e.run;
    if (!x) return "—";
    const rate = x.samples_per_s === null ? "no samples/s" : `${fmt(x.samples_per_s, 1)} samples/s`;
    return `${x.steps ?? "—"} of ${x.steps_expected}${x.exact_stop ? " (exact)" : " (**not exact**)"}, ${rate}, step ${x.step_time_s === null ? "—" : `${fmt(x.step_time_s * 1000, 0)} ms`} (${x.throughput_source ?? "—"})`;
  };
  const packages = (e) =>
    e.packages
      ? Object.entries(e.packages)
          .slice(0, 2)
          .map(([n, v]) => `${n} ${v}`)
          .join(", ")
      : "—";
  const old = r.schema !== "brim.bench-tune-corpus/v2";
  return [
    `${es.length} entries (${es.filter((e) => e.skipped).length} skipped)${old ? " of the corpus before issue 36 (copied public scripts, since removed)" : ", training entry points installed from PyPI (corpus/corpus.json)"}; ${tuneOptions(r)}; Pythons: ${Object.entries(
      r.pythons ?? {},
    )
      .map(([k, p]) => `${k} ${code(p?.version ?? "none")}`)
      .join(
        ", ",
      )}. Exact stops: ${es.filter((e) => e.run?.exact_stop).length} of ${es.filter((e) => e.run).length}. Of ${tuned.length} tuned: ${count((e) => e.tune.outcome === "winner")} with a winner, ${count((e) => e.tune.outcome.startsWith("ended without a winner"))} ended without one (exit 0), ${count((e) => e.tune.outcome === "no winner")} with no winner, ${count((e) => e.tune.outcome.startsWith("winner is trial 0"))} whose winner is trial 0, ${count((e) => e.tune.knobs_varied.length === 0)} that varied no knob.`,
    "",
    table(
      ["entry", "packages", "brim run --steps N", "tune: outcome", "knobs found → varied", "trials", "winner", "speed-up", "why not", "wall s"],
      es.map((e) =>
        e.skipped
          ? [e.name, packages(e), `skipped: ${e.skipped}`, "—", "—", "—", "—", "—", "—", "—"]
          : e.error
            ? [e.name, packages(e), e.error, "—", "—", "—", "—", "—", "—", "—"]
            : [
                e.name,
                packages(e),
                run(e),
                e.tune?.exit === 130 && !e.tune.winner ? "interrupted at the bench's time limit (exit 130)" : (e.tune?.outcome ?? "not tuned"),
                e.tune
                  ? `${(e.tune.bindings ?? []).map((b) => `${b.knob} (${b.via}${b.file ? ` ${b.file}` : ""}${b.key ? `:${b.key}` : ""})`).join(", ") || "none"} → ${e.tune.knobs_varied.join(", ") || "none"}`
                  : "—",
                e.tune
                  ? `${e.tune.trials.length}${
                      e.tune.trials.some((t) => t.end === "crashed")
                        ? ` (${e.tune.trials.filter((t) => t.end === "crashed").length} crashed: ${e.tune.trials
                            .filter((t) => t.end === "crashed")
                            .map((t) => knobs(t.knobs))
                            .join("; ")})`
                        : ""
                    }`
                  : "—",
                knobs(e.tune?.winner?.knobs),
                e.tune ? speedup(e.tune) : "—",
                e.tune ? reason(e.tune) : "—",
                e.tune ? fmt(e.tune.wall_s, 0) : "—",
              ],
      ),
    ),
    "",
    "Cases covered: " + es.map((e) => `${e.name}: ${(e.cases ?? []).join("; ")}`).join(" · ") + ".",
    "",
  ];
}

/** Any record file the generator has no table for: its command, machine and top-level figures. */
function unknownRecord(rel) {
  const abs = join(ROOT, rel);
  let recs;
  try {
    recs = rel.endsWith(".jsonl") ? readJsonLines(abs) : [JSON.parse(readFileSync(abs, "utf8"))];
  } catch {
    return [`- ${code(rel)}: not JSON; listed only.`, ""];
  }
  const cmds = uniq(recs.map((r) => (Array.isArray(r?.command) ? r.command.join(" ") : (r?.command ?? r?.command_line))).filter((c) => typeof c === "string"));
  const r = recs[0] ?? {};
  const scalars = Object.entries(r)
    .filter(([k, v]) => k !== "command" && (typeof v === "number" || typeof v === "boolean" || (typeof v === "string" && v.length < 80)))
    .slice(0, 16);
  return [
    `- ${code(rel)}${recs.length > 1 ? ` (${recs.length} records)` : ""}: command ${cmds.length ? cmds.slice(0, 3).map(code).join(", ") : "not recorded"}${scalars.length ? `; ${scalars.map(([k, v]) => `${k} ${typeof v === "number" ? +v.toFixed(4) : v}`).join(", ")}` : ""}.`,
    "",
  ];
}

function writerOf(name) {
  if (!existsSync(join(ROOT, "bench"))) return null;
  const bench = readdirSync(join(ROOT, "bench"))
    .filter((f) => f.endsWith(".mjs"))
    .sort();
  // the bench named after the record first: plan-script.json is not plan-script-h100.bench.mjs's
  const own = `${name.replace(/\.jsonl?$/, "")}.bench.mjs`;
  if (bench.includes(own)) return own;
  return bench.find((f) => readFileSync(join(ROOT, "bench", f), "utf8").includes(name.replace(/\.json$/, ""))) ?? null;
}

function cpuSection() {
  const files = readdirSync(join(ROOT, RESULTS), { withFileTypes: true })
    .filter((d) => d.isFile() && /\.jsonl?$/.test(d.name))
    .map((d) => d.name)
    .sort();
  const lines = [
    "## CPU benchmarks (`bench/results/*.json`)",
    "",
    "Made on this project's development VM, no GPU. Each file keeps the command that made it where its bench records one.",
    "",
  ];
  for (const name of files) {
    const rel = `${RESULTS}/${name}`;
    let r = null;
    try {
      r = JSON.parse(readFileSync(join(ROOT, rel), "utf8"));
    } catch {
      r = null;
    }
    const writer = writerOf(name);
    const figures = r && cpuFigures(name, r);
    const c = r?.commit ? namedCommit(r.commit, "the record's `commit`") : fileCommit(rel);
    const paths = SOURCES[name] ?? ["src", "python/brim", ...(writer ? [`bench/${writer}`] : [])];
    lines.push(`### ${code(rel)}`, "");
    lines.push(
      `Command: ${r?.command ? code(r.command) : `not recorded in the file${writer ? `; written by ${code(`bench/${writer}`)}` : ""}`}. Machine: ${r ? cpuMachine(r) : "?"}. Recorded at brim commit ${c.commit ? c.commit.slice(0, 7) : "?"} (${c.how})${r?.date || r?.generated_at ? `, ${String(r.date ?? r.generated_at).slice(0, 10)}` : ""}.`,
      "",
    );
    if (!SOURCES[name])
      lines.push(
        `No entry for this file in the generator's part → paths table (\`SOURCES\` in \`scripts/benchmarks.mjs\`): any change under ${paths.map(code).join(", ")} counts.`,
        "",
      );
    lines.push(staleness(c.commit, paths), "");
    lines.push(...(figures ?? unknownRecord(rel)));
  }
  return lines;
}

// ---------- the whole document ----------
function generate() {
  checkHistory();
  const out = new Map();
  const gpuRoot = join(ROOT, RESULTS, "gpu");
  const gpuDirs = existsSync(gpuRoot)
    ? readdirSync(gpuRoot, { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => `${RESULTS}/gpu/${d.name}`)
        .sort()
    : [];
  const lines = [
    "# Benchmarks",
    "",
    "<!-- Generated by `npm run benchmarks` (scripts/benchmarks.mjs) from the records under bench/results/. Do not edit by hand: change the records or the script, then regenerate. -->",
    "",
    "Every figure below is recomputed from the raw records in `bench/results/` by `scripts/benchmarks.mjs`. Each part names the machine, the brim commit and the command that measured it, and says whether code that part measures has changed since (git history: a stale part describes the code at its commit, not today's, until it is measured again).",
    "",
    ...gpuDirs.flatMap((d) => gpuFolder(d, out)),
    ...cpuSection(),
  ];
  out.set(
    "BENCHMARKS.md",
    lines
      .join("\n")
      .replace(/\n{3,}/g, "\n\n")
      .trimEnd() + "\n",
  );
  return out;
}

function diffSummary(rel, want, have) {
  if (have === null) return `${rel}: missing`;
  const a = have.split("\n");
  const b = want.split("\n");
  let first = 0;
  while (first < Math.min(a.length, b.length) && a[first] === b[first]) first++;
  const count = (lines) => lines.reduce((m, l) => m.set(l, (m.get(l) ?? 0) + 1), new Map());
  const [ca, cb] = [count(a), count(b)];
  const only = (x, y) => [...x].reduce((n, [l, k]) => n + Math.max(0, k - (y.get(l) ?? 0)), 0);
  return `${rel}: differs from line ${first + 1} (${only(cb, ca)} lines new, ${only(ca, cb)} gone)\n  committed: ${(a[first] ?? "(end)").slice(0, 160)}\n  generated: ${(b[first] ?? "(end)").slice(0, 160)}`;
}

function main(argv) {
  const check = argv.includes("--check");
  const value = (flag) => {
    const at = argv.indexOf(flag);
    if (at >= 0 && argv[at + 1] === undefined) throw new Failure(`${flag} needs a value`);
    return at >= 0 ? resolve(argv[at + 1]) : null;
  };
  ROOT = value("--root") ?? ROOT;
  const outDir = value("--out-dir") ?? ROOT;
  const unknown = argv.filter((a, i) => !["--check", "--out-dir", "--root"].includes(a) && !["--out-dir", "--root"].includes(argv[i - 1]));
  if (unknown.length) throw new Failure(`unknown argument ${unknown[0]} (usage: node scripts/benchmarks.mjs [--check] [--out-dir <dir>] [--root <repo>])`);
  const files = generate();
  if (check) {
    const stale = [...files].flatMap(([rel, text]) => {
      const p = join(outDir, rel);
      const have = existsSync(p) ? readFileSync(p, "utf8") : null;
      return have === text ? [] : [diffSummary(rel, text, have)];
    });
    if (stale.length) {
      process.stderr.write(`benchmarks: stale, run \`npm run benchmarks\` and commit the result:\n${stale.join("\n")}\n`);
      return 1;
    }
    process.stdout.write(`benchmarks: ${[...files.keys()].join(", ")} up to date\n`);
    return 0;
  }
  for (const [rel, text] of files) {
    const p = join(outDir, rel);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(`${p}.tmp`, text);
    renameSync(`${p}.tmp`, p);
  }
  process.stdout.write(`benchmarks: wrote ${[...files.keys()].map((f) => relative(process.cwd(), join(outDir, f)) || f).join(", ")}\n`);
  return 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof Failure)) throw error;
    process.stderr.write(`benchmarks: ${error.message}\n`);
    process.exitCode = 1;
  }
}
