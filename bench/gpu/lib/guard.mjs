// Part 3: the guard. `brim run --cap` on nbeats with a cap well under the card: a run that fits,
// one whose unguarded peak the planner puts well above the cap (the SDK must split the micro-batch
// to stay under it), and an out-of-memory error injected at a step (BRIM_FAULT_OOM_AT_STEP) that
// must be recovered in the process with no step lost.
import { join } from "node:path";
import { jobCommand, knobArgs } from "./jobs.mjs";
import { GiB, parseJsonOutput, planGpuArgs, readRunStore, runProcess } from "./common.mjs";

const PART = "guard";
const WINDOWS_PER_SERIES = 191; // examples/nbeats/config.yaml: (1024 - 240 - 24) / 4 + 1 windows per series

export function parseSize(text) {
  const m = /^(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|TiB)?$/i.exec(String(text).trim());
  if (!m) throw new Error(`not a size: ${text}`);
  const unit = { b: 1, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40 }[(m[2] ?? "B").toLowerCase()];
  return Math.round(Number(m[1]) * unit);
}

/** The largest micro-batch the plan puts at or under `bytes` (margin 0). */
async function microBatchFor(c, job, bytes) {
  const args = [
    "plan",
    job.spec,
    ...planGpuArgs(c.machine),
    "--precision",
    "fp32",
    "--optimizer",
    job.optimizer,
    "--cap",
    `${Math.floor(bytes / 2 ** 20)}MiB`,
    "--margin",
    "0",
    "--json",
  ];
  const res = await c.brim(args, { timeoutS: 60 });
  const plan = parseJsonOutput(res.stdout);
  return { mb: plan?.max_micro_batch ?? null, argv: c.recorded(c.brimArgv(args)) };
}

/** The plan's peak at micro-batch `mb` (what the job would hold without the guard). */
async function predictedPeak(c, job, mb) {
  const args = [
    "plan",
    job.spec,
    ...planGpuArgs(c.machine),
    "--precision",
    "fp32",
    "--optimizer",
    job.optimizer,
    "--batch",
    String(mb),
    "--effective-batch",
    String(mb),
    "--json",
  ];
  const res = await c.brim(args, { timeoutS: 60 });
  return parseJsonOutput(res.stdout)?.memory?.peak_bytes ?? null;
}

export async function guard(c, { workloads: jobs, settings }) {
  const results = c.results(PART);
  const s = settings.guard;
  const job = jobs.find((j) => j.example === "nbeats");
  if (!job) {
    c.log(`${PART}: no nbeats job in this call (--jobs); skipped`);
    return;
  }
  const cap = parseSize(s.cap);
  const store = join(c.work, "store-guard");
  const cases = [
    { name: "cap-fit", share: s.fitShare, env: {} },
    ...(s.pressureShare !== null ? [{ name: "cap-pressure", share: s.pressureShare, env: {} }] : []),
    { name: "oom-injected", share: s.fitShare, env: { BRIM_FAULT_OOM_AT_STEP: String(s.oomAt) } },
  ];
  for (const kase of cases) {
    const key = `${job.name}|${kase.name}|${s.cap}`;
    if (results.has(key)) continue;
    if (!c.fits("guard-run", s.guessS)) return;
    const startedAt = new Date().toISOString();
    const t0 = Date.now();
    // micro-batch: from the plan when a share of the cap is asked for, else the naive config's
    const sizing = kase.share !== null ? await microBatchFor(c, job, kase.share * cap) : { mb: null, argv: null };
    const mb = sizing.mb === null ? null : Math.max(1, sizing.mb >= 1024 ? Math.floor(sizing.mb / 256) * 256 : sizing.mb);
    const sets = mb !== null && mb > job.datasetSize ? [`data.n_series=${Math.ceil(mb / WINDOWS_PER_SERIES) + 1}`] : [];
    // no loader workers: batches this big through worker shared memory fail where /dev/shm is small
    const knobs = mb !== null ? { batch_size: mb } : {};
    const predicted = mb !== null ? await predictedPeak(c, job, mb) : null;
    const argv = c.brimArgv([
      "run",
      "--quiet",
      "--json",
      "--store",
      store,
      "--cap",
      s.cap,
      "--steps",
      String(s.steps),
      "--warmup",
      "1",
      ...knobArgs(knobs),
      "--",
      ...jobCommand(c, job, sets),
    ]);
    const res = await runProcess(argv, { timeoutS: c.timeoutFor(s.limitS), env: { ...process.env, ...kase.env } });
    if (res.timedOut && c.remainingS() <= 5) return;
    const record = parseJsonOutput(res.stdout);
    const run = record?.id ? readRunStore(store, record.id) : null;
    const summary = record?.summary ?? null;
    const peak = summary ? (record.cap_scope === "ram" ? summary.peak_tree_rss_bytes : summary.peak_tree_gpu_bytes) : null;
    const recovered = (run?.events ?? []).filter((e) => e.event === "oom_recovered");
    const checks = {
      ended_ok: record?.end?.cause === "ok",
      peak_under_cap: typeof peak === "number" ? peak <= cap : null,
      steps_equal_budget: summary ? summary.steps === s.steps : null,
      oom_recovered_event: kase.name === "oom-injected" ? recovered.some((e) => e.step === s.oomAt) : null,
    };
    const ok = checks.ended_ok && checks.peak_under_cap !== false && checks.steps_equal_budget === true && checks.oom_recovered_event !== false;
    c.took("guard-run", (Date.now() - t0) / 1000);
    results.add(
      c.envelope(PART, key, argv, startedAt, {
        ok,
        error: ok
          ? null
          : `checks failed: ${
              Object.entries(checks)
                .filter(([, v]) => v === false)
                .map(([k]) => k)
                .join(", ") ||
              (record?.end?.message ?? "no run record")
            }`,
        job: job.name,
        case: kase.name,
        env: kase.env,
        cap: s.cap,
        cap_bytes: cap,
        cap_scope: record?.cap_scope ?? null,
        cap_share_planned: kase.share,
        micro_batch: mb,
        predicted_unguarded_peak_bytes: predicted,
        sizing_command: sizing.argv,
        step_budget: s.steps,
        checks,
        peak_bytes: peak,
        peak_gib: typeof peak === "number" ? peak / GiB : null,
        run_id: record?.id ?? null,
        end: record?.end ?? null,
        summary,
        run_versions: record?.versions ?? null,
        events: run?.events ?? [],
        output_tail: ok ? undefined : run?.output_tail,
      }),
    );
  }
}
