// Part 4: brim's overhead. Each job bare and under `brim run --hz 10`, interleaved (bare, brim,
// bare, brim ...) so drift hits both alike; throughput from the job's own last line
// (`[name] done ... samples_per_s=...`, the same definition both ways: all steps but the first).
import { join } from "node:path";
import { jobCommand } from "./jobs.mjs";
import { median, parseDoneLine, readRunStore, runProcess, parseJsonOutput } from "./common.mjs";

const PART = "overhead";

export async function overhead(c, { workloads: jobs, settings }) {
  const results = c.results(PART);
  const s = settings.overhead;
  const store = join(c.work, "store-overhead");
  for (const job of jobs) {
    const key = `${job.name}|hz${s.hz}|steps${s.steps}`;
    if (results.has(key)) continue;
    if (!c.fits("overhead-job", s.guessS)) return;
    const startedAt = new Date().toISOString();
    const bareArgv = jobCommand(c, job, [], ["--steps", String(s.steps)]);
    const brimArgv = c.brimArgv(["run", "--quiet", "--json", "--store", store, "--hz", String(s.hz), "--steps", String(s.steps), "--", ...bareArgv]);
    const runs = [];
    let cut = false;
    for (let i = 0; i < s.pairs && !cut; i++) {
      for (const mode of ["bare", "brim"]) {
        const res = await runProcess(mode === "bare" ? bareArgv : brimArgv, { timeoutS: c.timeoutFor(s.limitS) });
        if (res.timedOut && c.remainingS() <= 5) {
          cut = true;
          break;
        }
        let done = null;
        let runId = null;
        if (mode === "bare") done = parseDoneLine(res.stdout.split("\n"));
        else {
          runId = parseJsonOutput(res.stdout)?.id ?? null;
          done = runId ? readRunStore(store, runId).done : null;
        }
        runs.push({
          pair: i,
          mode,
          samples_per_s: done?.samples_per_s ?? null,
          steps: done?.steps ?? null,
          elapsed_s: done?.elapsed_s ?? null,
          wall_s: res.wallS,
          exit_code: res.code,
          run_id: runId,
        });
      }
    }
    if (cut) return; // the budget ran out mid-job: measured again, whole, next call
    const bare = median(runs.filter((r) => r.mode === "bare").map((r) => r.samples_per_s));
    const under = median(runs.filter((r) => r.mode === "brim").map((r) => r.samples_per_s));
    const pairRatios = [];
    for (let i = 0; i < s.pairs; i++) {
      const b = runs.find((r) => r.pair === i && r.mode === "bare")?.samples_per_s;
      const u = runs.find((r) => r.pair === i && r.mode === "brim")?.samples_per_s;
      if (typeof b === "number" && typeof u === "number" && b > 0) pairRatios.push(u / b);
    }
    const ok = bare !== null && under !== null && runs.every((r) => r.exit_code === 0);
    c.took(
      "overhead-job",
      runs.reduce((a, r) => a + r.wall_s, 0),
    );
    results.add(
      c.envelope(PART, key, brimArgv, startedAt, {
        ok,
        error: ok ? null : "a run failed or printed no done line",
        job: job.name,
        hz: s.hz,
        steps: s.steps,
        pairs: s.pairs,
        bare_command: c.recorded(bareArgv),
        runs,
        bare_samples_per_s_median: bare,
        brim_samples_per_s_median: under,
        ratio: bare && under !== null ? under / bare : null,
        pair_ratios: pairRatios,
        ratio_of_pairs_median: median(pairRatios),
      }),
    );
  }
}
