/**
 * Why `brim doctor` has no step to judge, told from what the record holds: whether the job's Python
 * spoke at all (the attach connects at its first message: a DataLoader built, a step done), whether a
 * DataLoader was built, how busy its processes were, and how the run ended. The advice follows: a
 * first step still running asks for a longer run, not for `brim.track(loader)` in a job with no loader.
 *
 * @module
 */
import { formatPercent, formatSeconds } from "../../format.ts";
import type { Ctx } from "./context.ts";

/** Below this share of one core the job's processes were waiting, not computing. */
const IDLE_CPU_PERCENT = 20;

/** How the run ended, as a clause: "before brim was interrupted", "when it crashed". */
function endedClause(cause: string | null): string {
  if (cause === null) return "so far (the run has not ended)";
  if (cause === "interrupted") return "before it was interrupted";
  if (cause === "ok") return "before it exited";
  return `before it ended (${cause})`;
}

/**
 * The note for a run in which brim counted no step, from what was seen of the job.
 *
 * @example
 * ```ts
 * noStepsNote(ctx); // "No step was counted in the job's 41.2 s before it was interrupted: ..."
 * ```
 */
export function noStepsNote(ctx: Pick<Ctx, "tl" | "m" | "meta">): string {
  const { tl, m, meta } = ctx;
  const loaders = tl.eventCounts.loader ?? 0;
  const spoke = tl.hellos.length > 0 || loaders > 0;
  const lasted = m.duration_s !== null ? `the job's ${formatSeconds(m.duration_s)}` : "the run";
  const cpu = m.tree_cpu_percent_mean;
  const seen = [
    "no optimizer step finished",
    loaders > 0 ? `${loaders} DataLoader${loaders === 1 ? " was" : "s were"} built but gave no counted step` : "no DataLoader was built",
    "no output line read as progress",
  ];
  const heard = spoke ? "" : " (the job's Python sent brim nothing: the attach reports its first step or DataLoader)";
  const head = `No step was counted in ${lasted} ${endedClause(meta.end?.cause ?? null)}: ${seen.join(", ")}${heard}.`;
  if (cpu !== null && cpu < IDLE_CPU_PERCENT)
    return `${head} Its processes used ${formatPercent(cpu)} of a core: it was waiting, not training (a download, input, a lock, another process); see the end of output.log.`;
  const busy = cpu !== null ? ` Its processes used ${formatPercent(cpu)} of a core: it was computing, so its first step had likely not finished.` : "";
  const why =
    " A first step can be long: a closure optimizer (LBFGS) runs many forward and backward passes inside one optimizer.step(), and a first step that compiles can take minutes.";
  const next =
    loaders > 0
      ? " Run it longer, past its first steps; if its loop calls neither backward() nor an optimizer, wrap its batches in brim.track(loader)."
      : " Run it longer, past its first steps (brim run --steps 10 lets it reach 10, then stops it); if it trains without torch's optimizers, make it print its progress and pass --progress-pattern.";
  return `${head}${busy}${why}${next}`;
}

/**
 * Why the data-wait check has nothing to judge, from what was seen: no step, only warm-up steps, or
 * steps with no loader to time.
 *
 * @example
 * ```ts
 * noDataWaitReason(ctx); // "every counted step was warm-up: ..."
 * ```
 */
export function noDataWaitReason(ctx: Pick<Ctx, "tl" | "m" | "steady">): string {
  const { tl, m, steady } = ctx;
  if (m.steps === 0) return "no step was counted (see the note above)";
  if (steady.length === 0) return `every counted step (${m.steps}) was warm-up: none is steady to time; run more steps than --warmup`;
  if ((tl.eventCounts.loader ?? 0) === 0)
    return "no DataLoader was seen: data wait is timed on a DataLoader's batches; a job with its own batch iterable can wrap it in brim.track(...)";
  return "the steps carried no data-wait time: wrap the loader in brim.track(...) so brim can time the wait for each batch";
}
