/**
 * `brim doctor`'s analysis: findings about a recorded run, each with the numbers that show it, a fix
 * in the user's terms, how sure it is, and where a knob can verify the fix, the `brim tune` command
 * that does. Pure: it reads a run's metadata and timeline, nothing else. Each check is one file of
 * this folder; {@link CHECK_FUNCTIONS} lists them in the order they run.
 *
 * @module
 */
import type { RunMeta, TimelineEntry } from "../../record/types.ts";
import { isGpuRun, readTimeline, steadySamples, steadySteps, type Timeline } from "../../record/timeline/index.ts";
import { measureRun } from "../measure.ts";
import { CERTAINTY_ORDER, SEVERITY_ORDER, type CheckResult, type Ctx } from "./context.ts";
import type { CheckId, DoctorReport, Finding, NotEvaluated, Passed } from "./types.ts";
import { dataStarved } from "./data-starved.ts";
import { launchBound } from "./launch-bound.ts";
import { memoryUnused } from "./memory-unused.ts";
import { fp32OnTensorCores } from "./fp32-on-tensor-cores.ts";
import { nonfiniteLoss } from "./nonfinite-loss.ts";
import { oomRecovered } from "./oom-recovered.ts";
import { pcieTraffic } from "./pcie-traffic.ts";
import { clocksHeldBack } from "./clocks-held-back.ts";
import { gpuContexts } from "./gpu-contexts.ts";
import { utilizationGap } from "./utilization-gap.ts";
import { cpuRun } from "./cpu-run.ts";
import { slowSteps } from "./slow-steps.ts";
import { ranksCheck } from "./ranks.ts";
import { noStepsNote } from "./no-steps.ts";

export * from "./types.ts";

/**
 * The checks, in the order they run; each names the {@link CheckId} it reports under.
 *
 * @example
 * ```ts
 * CHECK_FUNCTIONS.length === CHECKS.length; // true
 * ```
 */
export const CHECK_FUNCTIONS: readonly { id: CheckId; run: (ctx: Ctx) => CheckResult | null }[] = [
  { id: "data_starved", run: dataStarved },
  { id: "launch_bound", run: launchBound },
  { id: "memory_unused", run: memoryUnused },
  { id: "fp32_on_tensor_cores", run: fp32OnTensorCores },
  { id: "nonfinite_loss", run: nonfiniteLoss },
  { id: "oom_recovered", run: oomRecovered },
  { id: "pcie_traffic", run: pcieTraffic },
  { id: "clocks_held_back", run: clocksHeldBack },
  { id: "gpu_contexts", run: gpuContexts },
  { id: "utilization_gap", run: utilizationGap },
  { id: "slow_steps", run: slowSteps },
  { id: "ranks", run: ranksCheck },
  { id: "cpu_run", run: cpuRun },
];

/**
 * Diagnoses a run: every check of {@link CHECKS} either finds something (with evidence, a fix and a
 * confidence), passes (with why), or could not be evaluated (with why). Findings come most severe first.
 *
 * @example
 * ```ts
 * const report = diagnose(meta, await loadTimeline(join(store.runDir(id), "timeline.ndjson")));
 * for (const f of report.findings) console.log(f.title, f.verify);
 * ```
 */
export function diagnose(meta: RunMeta, timeline: Timeline | readonly TimelineEntry[]): DoctorReport {
  const tl = "measured" in timeline ? timeline : readTimeline(timeline);
  const m = measureRun(meta, tl);
  const steady = steadySteps(tl);
  const gpu = isGpuRun(meta);
  const ctx: Ctx = { meta, tl, m, steady, samples: steadySamples(tl), gpu };
  const findings: Finding[] = [];
  const passed: Passed[] = [];
  const notEvaluated: NotEvaluated[] = [];
  for (const check of CHECK_FUNCTIONS) {
    const result = check.run(ctx);
    if (result === null) continue;
    if ("title" in result) findings.push(result);
    else if ("reason" in result) notEvaluated.push(result);
    else passed.push(result);
  }
  findings.sort((a, b) => SEVERITY_ORDER[a.severity] - SEVERITY_ORDER[b.severity] || CERTAINTY_ORDER[a.confidence.level] - CERTAINTY_ORDER[b.confidence.level]);
  const notes: string[] = [];
  if (m.steps === 0) notes.push(noStepsNote(ctx));
  else if (m.steady_steps === 0) notes.push("Every step was flagged warm-up: nothing is steady state yet; the numbers below use no steps.");
  if (tl.thinned)
    notes.push(
      `A long run: the numbers cover all ${tl.lines} timeline entries; per-step and per-reading evidence uses ${tl.steps.length} steps and ${tl.samples.length} readings spread evenly over the run.`,
    );
  if (meta.end === null) notes.push("The run has not ended (or brim stopped before writing its end): findings cover the timeline so far.");
  const gpuName = meta.device.gpus.find((g) => m.gpu_indexes.includes(g.index))?.name ?? meta.device.gpus[0]?.name;
  return {
    schema: "brim.doctor/v1",
    run: {
      id: meta.id,
      kind: meta.kind,
      command: meta.command,
      device: gpu && gpuName !== undefined ? gpuName : `CPU (${meta.device.host.cpus} cores)`,
      backend: meta.device.backend,
      gpu,
      started_at: meta.started_at,
      ended_at: meta.ended_at,
      end: meta.end?.cause ?? null,
      running: meta.end === null,
    },
    measures: m,
    findings,
    passed,
    not_evaluated: notEvaluated,
    notes,
  };
}
