/**
 * The `ranks` check of `brim doctor` (docs/doctor.md), for jobs of two or more ranks (torchrun,
 * accelerate, DeepSpeed): a collective hang (every rank stalled; brim dumped their stacks) told apart
 * from a straggler (one rank slower at its own work or at loading data, which every other rank then
 * waits for at each all-reduce).
 *
 * @module
 */
import { formatSeconds } from "../../format.ts";
import type { EventEntry, RankMeasures } from "../../record/timeline/index.ts";
import { median } from "../../stats.ts";
import * as T from "../thresholds.ts";
import { ev, finding, stepsConfidence, type CheckResult, type Ctx } from "./context.ts";

interface StalledRank {
  rank: number | null;
  pid: number;
  steps: number | null;
  top: string | null;
  file: string | null;
}

function stalledRanks(e: EventEntry): StalledRank[] {
  const list = Array.isArray(e.details.ranks) ? (e.details.ranks as Record<string, unknown>[]) : [];
  const num = (v: unknown): number | null => (typeof v === "number" ? v : null);
  const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
  return list.map((r) => ({ rank: num(r.rank), pid: num(r.pid) ?? 0, steps: num(r.steps), top: str(r.top_frame), file: str(r.stack_file) }));
}

function hang(ctx: Ctx, e: EventEntry): CheckResult {
  const ranks = stalledRanks(e);
  const name = (r: StalledRank): string => (r.rank !== null ? `rank ${r.rank}` : `pid ${r.pid}`);
  // the rank that never joined the collective is where the others are not
  const byFrame = new Map<string, StalledRank[]>();
  for (const r of ranks) if (r.top !== null) byFrame.set(r.top, [...(byFrame.get(r.top) ?? []), r]);
  const odd = byFrame.size >= 2 ? [...byFrame.values()].filter((g) => g.length === 1).flat() : [];
  // with two ranks there is no majority: the one stuck in the job's own code, not in torch's
  const inJob = ranks.filter((r) => r.top !== null && !/[/\\](site-packages|dist-packages|torch)[/\\]/.test(r.top));
  const culprit = odd.length === 1 ? odd[0] : inJob.length === 1 && byFrame.size >= 2 ? inJob[0] : undefined;
  const quiet = typeof e.details.quiet_s === "number" ? e.details.quiet_s : null;
  const evidence = [
    ev("ranks stalled", ranks.length, "count", e.message ?? `${ranks.length} ranks stopped stepping`),
    ...ranks.map((r) =>
      ev(
        `${name(r)} stack`,
        r.top ?? "not dumped",
        "text",
        `${name(r)} (pid ${r.pid}) at step ${r.steps ?? "?"}: ${r.top ?? "no stack dump"}${r.file !== null ? ` — ${r.file}` : ""}`,
      ),
    ),
  ];
  return finding(ctx, {
    id: "ranks",
    title: "Collective hang: all ranks stalled",
    severity: "high",
    confidence: {
      level: ranks.some((r) => r.top !== null) ? "high" : "medium",
      reason: ranks.some((r) => r.top !== null)
        ? "no rank stepped, and every rank's stack was dumped while it waited"
        : "no rank stepped; no stack could be dumped",
    },
    summary: `Every rank stopped stepping together${quiet !== null ? ` (no step on any rank for ${formatSeconds(quiet)})` : ""}: a collective that not every rank reached, not a slow rank. ${
      culprit !== undefined
        ? `${name(culprit).replace(/^r/, "R")} was elsewhere (${culprit.top}) while the others waited together (${[...byFrame.keys()].find((k) => k !== culprit.top)}).`
        : "The stacks show where each rank was."
    } brim ended the ranks before NCCL's 10-minute watchdog would have, with no trace.`,
    evidence,
    fix: {
      summary: culprit !== undefined ? `make ${name(culprit)} reach the collective the others wait in` : "make every rank reach the same collectives",
      steps: [
        "Code that only some ranks run (if rank == 0: evaluate, save, log) must not contain a collective or call into DDP/FSDP; move it outside, or run it on every rank.",
        "Uneven data: one rank running out of batches first leaves the others in an all-reduce; use DistributedSampler(drop_last=True) or model.join().",
        "A step that is legitimately slower than --hang-after (a long evaluation): raise --hang-after.",
      ],
    },
    knobs: [],
  });
}

function spread(ranks: RankMeasures[], pick: (r: RankMeasures) => number | null): { slowest: RankMeasures; value: number; others: number } | null {
  const values = ranks.map(pick);
  if (values.some((v) => v === null)) return null;
  let at = 0;
  values.forEach((v, i) => {
    if ((v as number) > (values[at] as number)) at = i;
  });
  const others = median(values.filter((_, i) => i !== at) as number[]);
  const slowest = ranks[at];
  if (others === null || slowest === undefined) return null;
  return { slowest, value: values[at] as number, others };
}

export function ranksCheck(ctx: Ctx): CheckResult {
  const stall = ctx.tl.events.find((e) => e.event === "ranks_stalled");
  if (stall !== undefined) return hang(ctx, stall);
  const ranks = ctx.tl.measured.ranks;
  if (ranks.length < 2) return { check: "ranks", why: "a single process: no ranks to compare" };
  const stepS = median(ranks.map((r) => r.step_time_s).filter((v): v is number => v !== null));
  if (stepS === null || stepS <= 0) return { check: "ranks", reason: "no timed steady step on the ranks" };
  const own = spread(ranks, (r) => r.own_time_s);
  const wait = spread(ranks, (r) => r.wait_time_s);
  const over = (s: typeof own): boolean => s !== null && s.value - s.others >= T.STRAGGLER_STEP_SHARE * stepS;
  const lines = ranks.map(
    (r) =>
      `rank ${r.rank}: step ${r.step_time_s !== null ? formatSeconds(r.step_time_s) : "?"}, own work ${r.own_time_s !== null ? formatSeconds(r.own_time_s) : "?"}, data wait ${r.wait_time_s !== null ? formatSeconds(r.wait_time_s) : "?"}`,
  );
  const which = over(own) ? own : over(wait) ? wait : null;
  if (which === null)
    return {
      check: "ranks",
      why: `${ranks.length} ranks in step: no rank's own work or data wait exceeds the others' by ${T.STRAGGLER_STEP_SHARE * 100}% of the ${formatSeconds(stepS)} step${own === null ? " (own work not timed: only data wait compared)" : ""}`,
    };
  const data = which === wait && !over(own);
  const { slowest, value, others } = which;
  const steady = Math.min(...ranks.map((r) => r.steady_steps));
  const conf = stepsConfidence(steady);
  const cost = value - others;
  return finding(ctx, {
    id: "ranks",
    title: `Straggler: rank ${slowest.rank} ${data ? "waits for data" : "is slower"}; the others wait for it`,
    severity: cost >= 0.3 * stepS ? "high" : "medium",
    confidence: { level: conf.level, reason: `${conf.why}; every rank kept stepping, so this is not a hang` },
    summary: `Rank ${slowest.rank} spends ${formatSeconds(value)} a step ${data ? "waiting for its next batch" : "on its own work (outside data wait and backward)"} against ${formatSeconds(others)} on the other ranks. Ranks synchronise at every all-reduce, so each step of every rank lasts about ${formatSeconds(cost)} longer (${((cost / stepS) * 100).toFixed(0)}% of the ${formatSeconds(stepS)} step); a hang would stop all ranks instead.`,
    evidence: [
      ev("slowest rank", slowest.rank, "count", `rank ${slowest.rank} (pid ${slowest.pid})`),
      ...lines.map((l, i) => ev(`rank ${ranks[i]?.rank}`, l, "text", l)),
    ],
    fix: data
      ? {
          summary: `give rank ${slowest.rank} its data faster`,
          steps: [
            "Look for work only that rank does while loading (logging, a cache it builds), or a shard of slower files.",
            "More loader workers or prefetch on every rank (the slowest sets the pace), or pre-processed data.",
          ],
        }
      : {
          summary: `find what rank ${slowest.rank} does more of`,
          steps: [
            "Work only some ranks do inside the step (if rank == 0: logging, metrics, a checkpoint): move it out of the step or make it asynchronous.",
            "An uneven split of the work (sequence lengths, a larger shard) or a slower device: balance the batches (bucket by length) or the hardware.",
          ],
        },
    knobs: [],
  });
}
