// Part "snapshots" (issue 26, item 5; not in `all`): per job, precision and its two largest
// accuracy micro-batches, one run of a few steps with PyTorch's CUDA memory history recorded
// (bench/gpu/memory_history.py wraps the unchanged script), and the summary of what was live at the
// peak of allocated bytes, by where it was made — the GPU-only allocations a CPU run cannot show
// (cuDNN's workspaces and reserve, cuBLAS's, the autograd engine's buffers, the allocator's
// rounding), for the planner to model. One record per run; the summary is in the record.
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { jobCommand, knobArgs } from "./jobs.mjs";
import { parseJsonOutput, readRunStore, runProcess } from "./common.mjs";

const PART = "snapshots";

export async function snapshots(c, { jobs, settings }) {
  const results = c.results(PART);
  const s = settings.snapshots;
  const store = join(c.work, "store-snapshots");
  const queue = [];
  for (const job of jobs)
    for (const precision of s.precisions)
      for (const mb of job.accuracy.microBatches.slice(-2)) {
        const key = `${job.name}|${precision}|${mb}`;
        if (!results.has(key)) queue.push({ job, precision, mb, key });
      }
  c.log(`${PART}: ${queue.length} runs to record`);
  mkdirSync(join(c.work, "snapshots"), { recursive: true });
  for (const { job, precision, mb, key } of queue) {
    if (!c.fits("snapshot", s.guessS)) return;
    const startedAt = new Date().toISOString();
    const t0 = Date.now();
    const summaryPath = join(c.work, "snapshots", `${key.replace(/[|]/g, "-")}.json`);
    const [python, ...script] = jobCommand(c, job, job.accuracy.set);
    const knobs = { ...job.accuracy.knobs, batch_size: mb, precision, accumulation: 1 };
    const argv = c.brimArgv([
      "run",
      "--quiet",
      "--json",
      "--store",
      store,
      "--steps",
      String(s.steps),
      "--warmup",
      String(s.warmup),
      ...knobArgs(knobs),
      "--",
      python,
      "bench/gpu/memory_history.py",
      "--summary",
      summaryPath,
      "--",
      ...script,
    ]);
    const res = await runProcess(argv, { timeoutS: c.timeoutFor(s.limitS) });
    if (res.timedOut && c.remainingS() <= 5) return; // cut by the budget: recorded next call
    const record = parseJsonOutput(res.stdout);
    const run = record?.id ? readRunStore(store, record.id) : null;
    const summary = existsSync(summaryPath) ? JSON.parse(readFileSync(summaryPath, "utf8")) : null;
    const ok = record?.end?.cause === "ok" && summary?.cuda === true;
    c.took("snapshot", (Date.now() - t0) / 1000);
    results.add(
      c.envelope(PART, key, argv, startedAt, {
        ok,
        error: ok ? null : (summary?.why ?? record?.end?.message ?? (res.timedOut ? "timed out" : (res.stderr.trim().split("\n").pop() ?? "no run record"))),
        job: job.name,
        precision,
        micro_batch: mb,
        knobs,
        run_id: record?.id ?? null,
        end: record?.end ?? null,
        measured: record?.summary
          ? {
              peak_tree_gpu_bytes: record.summary.peak_tree_gpu_bytes,
              framework_peak_reserved_bytes: record.summary.framework_peak_reserved_bytes,
              framework_peak_allocated_bytes: record.summary.framework_peak_allocated_bytes,
              steps: record.summary.steps,
            }
          : null,
        snapshot: summary,
        output_tail: ok ? undefined : run?.output_tail,
      }),
    );
  }
}
