// Part 2: `brim tune` on each job from its naive config (trials, wall time, winner, speedup), and an
// exhaustive grid over the micro-batch (× precision on a GPU), to state brim's winner as a share of
// the best throughput the grid measured.
import { join } from "node:path";
import { jobCommand } from "./jobs.mjs";
import { parseDuration, parseJsonOutput, runProcess } from "./common.mjs";

const PART = "tune";
const LOADER_KNOBS = ["num_workers", "pin_memory", "persistent_workers", "prefetch_factor"];

function trialDigest(t) {
  return {
    index: t.index,
    purpose: t.purpose,
    knobs: t.knobs,
    end: t.end,
    samples_per_s: t.samples_per_s,
    peak_bytes: t.peak_bytes,
    gpu_util_mean: t.gpu_util_mean ?? null,
    data_wait_share: t.data_wait_share ?? null,
    run_id: t.run_id ?? null,
  };
}

/** The facts of a tune record the campaign states. */
export function tuneDigest(record) {
  if (!record) return null;
  const trials = (record.trials ?? []).map(trialDigest).sort((a, b) => a.index - b.index);
  const baseline = trials.find((t) => t.index === 0) ?? null;
  const winnerTrial = record.winner ? (trials.find((t) => t.index === record.winner.index) ?? null) : null;
  const ok = trials.filter((t) => t.end === "ok" && typeof t.samples_per_s === "number");
  const best = ok.reduce((a, t) => (a === null || t.samples_per_s > a.samples_per_s ? t : a), null);
  const started = Date.parse(record.started_at);
  const ended = Date.parse(record.ended_at ?? "");
  return {
    tune_id: record.id,
    strategy: record.strategy ?? null,
    trials_count: trials.length,
    tune_wall_s: Number.isFinite(ended - started) ? (ended - started) / 1000 : null,
    stop_reason: record.stop_reason ?? null,
    baseline: baseline && { knobs: baseline.knobs, samples_per_s: baseline.samples_per_s, peak_bytes: baseline.peak_bytes, end: baseline.end },
    winner: record.winner && { ...record.winner, samples_per_s: winnerTrial?.samples_per_s ?? null, peak_bytes: winnerTrial?.peak_bytes ?? null },
    confirmation: record.confirmation ?? null,
    no_winner: record.no_winner ?? null,
    best_measured: best && { index: best.index, knobs: best.knobs, samples_per_s: best.samples_per_s },
    cap_bytes: record.cap_bytes ?? null,
    effective_batch: record.effective_batch ?? null,
    memory_line: record.memory_line ?? null,
    notes: record.notes ?? [],
    trials,
  };
}

export async function tunePart(c, { workloads: jobs, settings }) {
  const results = c.results(PART);
  const s = settings.tune;
  const g = settings.grid;
  const store = join(c.work, "store-tune");
  for (const job of jobs) {
    const common = [
      "--quiet",
      "--json",
      "--store",
      store,
      "--steps",
      String(s.steps),
      "--warmup",
      String(s.warmup),
      "--trial-time",
      s.trialTime,
      "--max-batch",
      String(job.datasetSize),
    ];
    const runs = [
      { kind: "brim", args: ["tune", ...common, "--max-trials", String(s.maxTrials), "--max-time", s.maxTime], guessS: s.guessS },
      {
        kind: "grid",
        args: [
          "tune",
          ...common,
          "--strategy",
          "grid",
          "--max-trials",
          "200",
          "--max-time",
          g.maxTime,
          "--knob",
          `batch_size=${job.grid.filter((m) => m <= job.datasetSize).join(",")}`,
          ...(g.precisions.length > 1 ? ["--knob", `precision=${g.precisions.join(",")}`] : ["--fix", "precision"]),
          ...[...LOADER_KNOBS, ...(g.fix ?? [])].flatMap((k) => ["--fix", k]),
        ],
        guessS: g.guessS,
      },
    ];
    for (const run of runs) {
      const key = `${job.name}|${run.kind}`;
      if (results.has(key)) continue;
      if (!c.fits(`tune-${run.kind}`, run.guessS)) return;
      const startedAt = new Date().toISOString();
      const argv = c.brimArgv([...run.args, "--", ...jobCommand(c, job)]);
      // a tune stops starting trials at --max-time; the one in flight may take up to --trial-time
      const limitS = parseDuration(run.kind === "grid" ? g.maxTime : s.maxTime) + parseDuration(s.trialTime) + 60;
      const res = await runProcess(argv, { timeoutS: c.timeoutFor(limitS) });
      if (res.timedOut && c.remainingS() <= 5) return;
      c.took(`tune-${run.kind}`, res.wallS);
      const digest = tuneDigest(parseJsonOutput(res.stdout));
      const extra = {};
      if (run.kind === "grid" && digest) {
        const brim = results.get(`${job.name}|brim`);
        const winner = brim?.tune?.winner?.samples_per_s ?? null;
        const best = digest.best_measured?.samples_per_s ?? null;
        extra.brim_winner_share_of_grid_best = winner !== null && best ? winner / best : null;
        extra.brim_tune_key = brim ? brim.key : null;
      }
      // a tune that names no winner and says why (no gain beyond noise, your configuration faster) has
      // done its job: which of the two it finds is what the campaign measures, not whether it ran
      const ok = digest !== null && digest.trials_count > 0 && (run.kind === "grid" || digest.winner !== null || digest.no_winner !== null);
      results.add(
        c.envelope(PART, key, argv, startedAt, {
          ok,
          error: ok ? null : digest ? (digest.notes.at(-1) ?? "no winner") : (res.stderr.trim().split("\n").pop() ?? `exit ${res.code}`),
          job: job.name,
          strategy: run.kind,
          wall_s: res.wallS,
          tune: digest,
          ...extra,
        }),
      );
    }
  }
}
