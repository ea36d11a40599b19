// Part 1: the planner's predicted peak against the measured one, per model × precision ×
// micro-batch. One record per pair, with everything the fit script needs (bench/gpu/fit-constants.mjs):
// the plan's components and the constants it assumed, and the three measured peaks.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { jobCommand, knobArgs } from "./jobs.mjs";
import { parseJsonOutput, planGpuArgs, readRunStore, runProcess } from "./common.mjs";

const PART = "plan-accuracy";

/** The plan as the pair keeps it: the peak, components, setup, and the constants assumed. */
function planDigest(plan, stage) {
  if (plan === null) return null;
  const chosen = stage ? ((plan.stages ?? []).find((s) => s.name === stage) ?? plan) : plan;
  return {
    peak_bytes: chosen.memory?.peak_bytes ?? null,
    components: chosen.memory?.components ?? null,
    setup: chosen.setup ?? plan.setup ?? null,
    params: chosen.params ?? plan.params ?? null,
    stage: chosen === plan ? null : stage,
    model: plan.model ?? null,
    gpu: plan.gpu ? { id: plan.gpu.id, memory_bytes: plan.gpu.memory_bytes } : null,
    assumptions: (plan.assumptions ?? []).map((a) => ({ name: a.name, value: a.value, calibrated: a.calibrated })),
  };
}

/** The profile without its per-tensor list: enough to plan from again. */
function profileDigest(profile) {
  const { params, ...rest } = profile;
  return { ...rest, params: params ? { ...params, tensors: undefined } : null };
}

async function runPlan(c, model, precision, mb, job) {
  const args = [
    "plan",
    model,
    ...planGpuArgs(c.machine),
    "--precision",
    precision,
    "--batch",
    String(mb),
    "--effective-batch",
    String(mb),
    "--optimizer",
    job.optimizer,
    "--json",
  ];
  const res = await c.brim(args, { timeoutS: 60 });
  const plan = res.code === 0 ? parseJsonOutput(res.stdout) : null;
  return {
    argv: c.brimArgv(args),
    plan: planDigest(plan, job.planStage),
    error: plan === null ? (res.stderr.trim().split("\n").pop() ?? `exit ${res.code}`) : null,
  };
}

/** The SDK profile of a job's model (once per job and call); null with the reason when it cannot be made. */
function profileFor(c, job, settings, cache) {
  // the promise is cached, so parallel workers share one profile run
  if (!cache.has(job.name)) cache.set(job.name, makeProfile(c, job, settings));
  return cache.get(job.name);
}

async function makeProfile(c, job, settings) {
  const path = join(c.work, "profiles", `${job.name}.json`);
  const sets = [...job.args.flatMap((a, i) => (job.args[i - 1] === "--set" ? [a] : [])), ...(job.planStage ? [`training.stage=${job.planStage}`] : [])];
  const cfg = job.args[job.args.indexOf("--config") + 1];
  const argv = [
    c.opts.python,
    "bench/gpu/profile_example.py",
    "--example",
    job.example,
    "--config",
    cfg,
    ...sets.flatMap((s) => ["--set", s]),
    "--samples",
    String(settings.profile.samples),
    "--out",
    path,
  ];
  const res = await runProcess(argv, { timeoutS: c.timeoutFor(settings.profile.limitS) });
  let info = null;
  try {
    info = JSON.parse(res.stdout.trim().split("\n").pop() ?? "null");
  } catch {
    info = null;
  }
  const made = info?.ok === true && existsSync(path);
  const entry = {
    argv: c.recorded(argv),
    path: made ? path : null,
    digest: made ? profileDigest(JSON.parse(readFileSync(path, "utf8"))) : null,
    error: made ? null : (info?.error ?? (res.stderr.trim().split("\n").pop() || `exit ${res.code}`)),
  };
  if (entry.error) c.log(`profile of ${job.name} not made: ${entry.error}`);
  return entry;
}

export async function planAccuracy(c, { jobs, settings, parallel }) {
  const results = c.results(PART);
  const profiles = new Map();
  const s = settings.accuracy;
  const store = join(c.work, "store-accuracy");
  const queue = [];
  for (const job of jobs)
    for (const precision of settings.precisions)
      for (const mb of job.accuracy.microBatches) {
        const key = `${job.name}|${precision}|${mb}`;
        if (!results.has(key)) queue.push({ job, precision, mb, key });
      }
  c.log(`${PART}: ${queue.length} pairs to measure`);

  const measure = async ({ job, precision, mb, key }) => {
    const startedAt = new Date().toISOString();
    const t0 = Date.now();
    const knobs = { ...job.accuracy.knobs, batch_size: mb, precision, accumulation: 1 };
    const argv = c.brimArgv([
      "run",
      "--quiet",
      "--json",
      "--store",
      store,
      "--hz",
      String(s.hz),
      "--steps",
      String(s.steps),
      "--warmup",
      String(s.warmup),
      ...knobArgs(knobs),
      "--",
      ...jobCommand(c, job, job.accuracy.set),
    ]);
    const profile = await profileFor(c, job, settings, profiles);
    // the plans need no GPU: made while the job runs
    const [res, planned, fromProfile] = await Promise.all([
      runProcess(argv, { timeoutS: c.timeoutFor(s.runLimitS) }),
      runPlan(c, job.spec, precision, mb, job),
      profile.path ? runPlan(c, profile.path, precision, mb, job) : Promise.resolve(null),
    ]);
    if (res.timedOut && c.remainingS() <= 5) return null; // cut by the budget: measured again next call
    const record = parseJsonOutput(res.stdout);
    const store_ = record?.id ? readRunStore(store, record.id) : null;
    const summary = record?.summary ?? null;
    const fallback = store_?.events.find((e) => e.event === "precision_fallback") ?? null;
    const measured = summary && {
      peak_tree_gpu_bytes: summary.peak_tree_gpu_bytes,
      framework_peak_reserved_bytes: summary.framework_peak_reserved_bytes,
      framework_peak_allocated_bytes: summary.framework_peak_allocated_bytes,
      peak_tree_rss_bytes: summary.peak_tree_rss_bytes,
      device_used_max_bytes: store_?.timeline.device_used_max_bytes ?? null,
      device_used_min_bytes: store_?.timeline.device_used_min_bytes ?? null,
      steps: summary.steps,
      micro_batch: summary.micro_batch,
      oom_recoveries: summary.oom_recoveries,
    };
    const ok = record?.end?.cause === "ok" && summary !== null && planned.plan !== null;
    c.took("accuracy-pair", (Date.now() - t0) / 1000);
    return c.envelope(PART, key, argv, startedAt, {
      ok,
      error: ok ? null : (record?.end?.message ?? planned.error ?? (res.timedOut ? "timed out" : (res.stderr.trim().split("\n").pop() ?? "no run record"))),
      job: job.name,
      model_spec: job.spec,
      precision,
      precision_in_force: fallback ? (fallback.details.to ?? null) : precision,
      micro_batch: mb,
      optimizer: job.optimizer,
      knobs,
      concurrent_runs: parallel,
      run_id: record?.id ?? null,
      end: record?.end ?? null,
      run_versions: record?.versions ?? null,
      measured,
      events: store_?.events ?? [],
      predicted: {
        spec: planned.plan,
        spec_error: planned.error,
        profile: fromProfile?.plan ?? null,
        profile_error: fromProfile ? fromProfile.error : profile.error,
      },
      commands: {
        plan_spec: c.recorded(planned.argv),
        plan_profile: fromProfile ? c.recorded(fromProfile.argv) : null,
        profile: profile.argv,
      },
      profile: profile.digest,
      output_tail: ok ? undefined : store_?.output_tail,
    });
  };

  const workers = Array.from({ length: parallel }, async () => {
    for (;;) {
      const item = queue.shift();
      if (item === undefined) return;
      if (!c.fits("accuracy-pair", s.guessS)) {
        queue.length = 0;
        return;
      }
      const rec = await measure(item);
      if (rec) results.add(rec);
    }
  });
  await Promise.all(workers);
}
