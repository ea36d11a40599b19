// Part 5: NVML utilization and GPM SM activity of each job before tuning (its naive config) and
// after (the tune's winning knobs), each a `brim run` long enough for steady-state sampling.
import { join } from "node:path";
import { jobCommand, knobArgs } from "./jobs.mjs";
import { parseJsonOutput, readRunStore, runProcess } from "./common.mjs";

const PART = "utilization";

/** Steps for about `targetS` seconds of steady state, from a throughput measured by the tune. */
function stepsFor(s, samplesPerS, batch) {
  if (typeof samplesPerS !== "number" || typeof batch !== "number" || samplesPerS <= 0) return s.minSteps;
  return Math.min(s.maxSteps, Math.max(s.minSteps, Math.ceil((s.targetS * samplesPerS) / batch)));
}

export async function utilization(c, { workloads: jobs, settings }) {
  const results = c.results(PART);
  const tunes = c.results("tune");
  const s = settings.utilization;
  const store = join(c.work, "store-utilization");
  for (const job of jobs) {
    const tuned = tunes.get(`${job.name}|brim`)?.tune ?? null;
    const phases = [
      { phase: "before", knobs: {}, sps: tuned?.baseline?.samples_per_s, batch: tuned?.baseline?.knobs?.batch_size },
      // a tune with no winner (and its reason) leaves the user's configuration as it was: that is the "after"
      tuned?.winner || !tuned?.no_winner
        ? { phase: "after", knobs: tuned?.winner?.knobs ?? null, sps: tuned?.winner?.samples_per_s, batch: tuned?.winner?.knobs?.batch_size }
        : {
            phase: "after",
            knobs: tuned.baseline?.knobs ?? {},
            sps: tuned.baseline?.samples_per_s,
            batch: tuned.baseline?.knobs?.batch_size,
            kept: "baseline",
          },
    ];
    for (const p of phases) {
      const key = `${job.name}|${p.phase}`;
      if (results.has(key)) continue;
      if (p.knobs === null) {
        c.log(`${PART} ${key}: no tune winner recorded for ${job.name} yet (run the tune part first); skipped`);
        continue;
      }
      if (!c.fits("utilization-run", s.guessS)) return;
      const steps = stepsFor(s, p.sps, p.batch);
      const startedAt = new Date().toISOString();
      const argv = c.brimArgv([
        "run",
        "--quiet",
        "--json",
        "--store",
        store,
        "--hz",
        String(s.hz),
        "--steps",
        String(steps),
        "--warmup",
        String(s.warmup),
        ...knobArgs(p.knobs),
        "--",
        ...jobCommand(c, job),
      ]);
      const res = await runProcess(argv, { timeoutS: c.timeoutFor(s.limitS) });
      if (res.timedOut && c.remainingS() <= 5) return;
      c.took("utilization-run", res.wallS);
      const record = parseJsonOutput(res.stdout);
      const run = record?.id ? readRunStore(store, record.id) : null;
      const sum = record?.summary ?? null;
      const ok = record?.end?.cause === "ok" && sum !== null;
      results.add(
        c.envelope(PART, key, argv, startedAt, {
          ok,
          error: ok ? null : (record?.end?.message ?? res.stderr.trim().split("\n").pop() ?? "no run record"),
          job: job.name,
          phase: p.phase,
          knobs: p.knobs,
          kept: p.kept ?? null,
          tune_id: tuned?.tune_id ?? null,
          steps,
          gpu_util_mean: sum?.gpu_util_mean ?? null,
          sm_activity_mean: sum?.sm_activity_mean ?? null,
          samples_per_s: sum?.samples_per_s ?? null,
          data_wait_share: sum?.data_wait_share ?? null,
          power_mean_w: sum?.power_mean_w ?? null,
          energy_j_per_sample: sum?.energy_j_per_sample ?? null,
          peak_tree_gpu_bytes: sum?.peak_tree_gpu_bytes ?? null,
          run_id: record?.id ?? null,
          end: record?.end ?? null,
          summary: sum,
          run_versions: record?.versions ?? null,
          samples_stored: run?.timeline.samples_stored ?? null,
          output_tail: ok ? undefined : run?.output_tail,
        }),
      );
    }
  }
}
