import type { GuardResult } from "../guard/guard.ts";
import { formatBytes } from "../bytes.ts";
import { formatDuration } from "../metrics/index.ts";
import { isWarmupStep, mainSteps } from "../record/timeline/index.ts";

/** What `brim run` returns: the guarded run and the exit status to give (the job's). */
export interface RunCommandResult {
  result: GuardResult;
  exitCode: number;
  storeRoot: string;
  note: string | null;
  /** The job's output left the summary's line (stderr, or one file behind both streams) unfinished: a progress bar's last `\r` update. */
  lineOpen: boolean;
}

/** Why steps were counted but none was steady: every one was warm-up (the first --warmup, or a step that compiled). */
function noSteadyReason(run: RunCommandResult): string {
  const steps = mainSteps(run.result.timeline);
  const warm = steps.filter(isWarmupStep).length;
  if (steps.length === 0 || warm < steps.length) return "";
  return `: all ${warm} step${warm === 1 ? " was" : "s were"} warm-up, left out of throughput (the first --warmup steps, and any step that compiled or ran a validation pass); run more steps than --warmup (--steps), e.g. --steps ${warm + 10} for 10 steady steps, or lower --warmup (--warmup 1 where each step is slow)`;
}

/**
 * The end-of-run summary as text.
 *
 * @example
 * ```ts
 * out.stderr(renderRunSummary(result));
 * ```
 */
export function renderRunSummary(run: RunCommandResult): string {
  const { meta, summary } = run.result;
  const end = meta.end;
  const lines: string[] = [];
  const scope = meta.cap_scope === "gpu" ? "GPU" : "RAM";
  lines.push(`brim: run ${meta.id} ended: ${end?.cause ?? "?"}${end && end.cause !== "ok" ? ` — ${end.message}` : ""}`);
  const source = summary.throughput_source
    ? ` (measured by ${summary.throughput_source === "progress" ? "the job's progress lines" : summary.throughput_source === "attach" ? "attach" : "the SDK"})`
    : "";
  const ranks = run.result.timeline.measured.ranks;
  const global = ranks.length > 0 && ranks.every((r) => r.samples_per_s !== null) ? `, all ${ranks.length} ranks together` : "";
  const throughput =
    summary.samples_per_s !== null
      ? `${summary.samples_per_s.toPrecision(4)} samples/s${global} over ${summary.steady_steps} steady steps${source}`
      : summary.step_time_s !== null && summary.steady_steps > 0
        ? `${summary.step_time_s.toPrecision(4)} s per step over ${summary.steady_steps} steady steps${source}; samples per step unknown`
        : `no steady steps reported${summary.steps === 0 ? " (brim saw no optimizer step, DataLoader or progress line, or the job stopped before its first step)" : noSteadyReason(run)}`;
  lines.push(`  throughput   ${throughput}`);
  if (ranks.length > 0)
    lines.push(
      `  ranks        ${ranks
        .map((r) => {
          const rate = r.samples_per_s !== null ? `${r.samples_per_s.toPrecision(4)} samples/s` : "?";
          const time = r.step_time_s !== null ? `, ${(r.step_time_s * 1000).toPrecision(3)} ms/step` : "";
          const own = r.own_time_s !== null ? `, own work ${(r.own_time_s * 1000).toPrecision(3)} ms` : "";
          const wait = r.data_wait_share !== null ? `, data wait ${(r.data_wait_share * 100).toFixed(1)}%` : "";
          const mem = r.peak_allocated_bytes !== null ? `, peak ${(r.peak_allocated_bytes / 2 ** 20).toFixed(0)} MiB` : "";
          return `rank ${r.rank} ${rate} (${r.steps} steps${time}${own}${wait}${mem})`;
        })
        .join(" · ")}`,
    );
  if (summary.data_wait_share !== null) lines.push(`  data wait    ${(summary.data_wait_share * 100).toFixed(1)}% of step time`);
  if (summary.env_steps_per_s != null) lines.push(`  environment  ${summary.env_steps_per_s.toFixed(1)} steps/s of the vector environments (the job's own)`);
  const pss = summary.peak_tree_pss_bytes ?? null;
  const peak = meta.cap_scope === "gpu" ? summary.peak_tree_gpu_bytes : (pss ?? summary.peak_tree_rss_bytes);
  const counted =
    meta.cap_scope === "gpu"
      ? "process tree"
      : pss !== null
        ? `PSS of the process tree; RSS ${summary.peak_tree_rss_bytes !== null ? formatBytes(summary.peak_tree_rss_bytes) : "?"}`
        : "RSS of the process tree";
  if (peak !== null)
    lines.push(
      `  peak memory  ${formatBytes(peak)} ${scope} (${counted})${meta.cap_bytes !== null ? ` of the ${formatBytes(meta.cap_bytes)} cap (${((peak / meta.cap_bytes) * 100).toFixed(0)}%)` : ""}`,
    );
  if (summary.framework_peak_allocated_bytes !== null)
    lines.push(
      `  framework    peak allocated ${formatBytes(summary.framework_peak_allocated_bytes)}, reserved ${formatBytes(summary.framework_peak_reserved_bytes ?? 0)}`,
    );
  if (summary.gpu_util_mean !== null)
    lines.push(
      `  utilization  ${summary.gpu_util_mean.toFixed(0)}% GPU (time a kernel ran)${summary.sm_activity_mean !== null ? `, ${summary.sm_activity_mean.toFixed(0)}% SM activity` : ""}`,
    );
  if (summary.energy_j_per_sample !== null) lines.push(`  energy       ${summary.energy_j_per_sample.toPrecision(3)} J/sample`);
  if (summary.oom_recoveries > 0) lines.push(`  recovered    ${summary.oom_recoveries} out-of-memory errors inside the step (no step lost)`);
  lines.push(
    `  duration     ${formatDuration(summary.duration_s)} · ${summary.steps} steps${ranks.length > 0 ? ` (optimizer steps of rank ${ranks[0]?.rank ?? 0}; every rank steps with it)` : ""}`,
  );
  lines.push(`  record       ${run.storeRoot}/runs/${meta.id}  (brim doctor ${meta.id})`);
  return `${lines.join("\n")}\n`;
}
