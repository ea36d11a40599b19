import { describe, expect, it } from "vitest";
import { readTimeline } from "../../src/record/timeline/index.ts";
import type { TimelineEntry } from "../../src/record/types.ts";

// Two data-parallel ranks (torchrun): rank 0 at 100 samples/s, rank 1 at 50, 10 steps each.
function ranks(stepsEach: number, world = 2): TimelineEntry[] {
  const entries: TimelineEntry[] = [{ t: 0, kind: "start", pid: 1 }];
  for (let rank = 0; rank < world; rank++) entries.push({ t: 0.1, kind: "hello", pid: 10 + rank, role: "main", rank });
  for (let i = 0; i < stepsEach; i++)
    for (let rank = 0; rank < world; rank++)
      entries.push({
        t: 1 + i,
        kind: "step",
        pid: 10 + rank,
        step: i,
        samples: 10,
        wait_s: 0,
        compute_s: rank === 0 ? 0.1 : 0.2,
        warmup: i < 2,
        source: "attach",
      });
  return entries;
}

describe("a run of ranks, summarised as one job", () => {
  it("counts rank 0's optimizer steps once and sums the ranks' own samples/s, each rank's figures beside", () => {
    const m = readTimeline(ranks(10)).measured;
    expect(m.steps).toBe(10);
    expect(m.steady_steps).toBe(8);
    expect(m.samples_per_s).toBeCloseTo(100 + 50, 9);
    expect(m.samples).toBe(200);
    expect(m.steady_samples).toBe(160);
    expect(m.ranks.map((r) => [r.rank, r.pid, r.steps, r.steady_steps])).toEqual([
      [0, 10, 10, 8],
      [1, 11, 10, 8],
    ]);
    expect(m.ranks[0]?.samples_per_s).toBeCloseTo(100, 9);
    expect(m.ranks[1]?.samples_per_s).toBeCloseTo(50, 9);
  });

  it("gives each rank its own step time, data wait, compute and peak memory", () => {
    const entries = ranks(10).map((e) =>
      e.kind === "step" ? { ...e, wait_s: e.pid === 11 ? 0.05 : 0, compute_s: e.pid === 11 ? 0.15 : 0.1, mem: { peak: e.pid === 11 ? 2e9 : 1e9 } } : e,
    );
    entries.splice(
      1,
      2,
      { t: 0.1, kind: "hello", pid: 10, role: "main", rank: 0, local_rank: 0 },
      { t: 0.1, kind: "hello", pid: 11, role: "main", rank: 1, local_rank: 1 },
    );
    const [r0, r1] = readTimeline(entries).measured.ranks;
    expect([r0?.local_rank, r1?.local_rank]).toEqual([0, 1]);
    expect(r0?.step_time_s).toBeCloseTo(0.1, 9);
    expect(r1?.step_time_s).toBeCloseTo(0.2, 9);
    expect(r1?.wait_time_s).toBeCloseTo(0.05, 9);
    expect(r1?.compute_time_s).toBeCloseTo(0.15, 9);
    expect(r0?.data_wait_share).toBe(0);
    expect(r1?.data_wait_share).toBeCloseTo(0.25, 9);
    expect([r0?.peak_allocated_bytes, r1?.peak_allocated_bytes]).toEqual([1e9, 2e9]);
  });

  it("takes a rank learnt after the hello (Lightning's own DDP sets no RANK)", () => {
    const entries = ranks(10).map((e) => (e.kind === "hello" ? { ...e, rank: null } : e));
    entries.push(
      { t: 0.2, kind: "event", pid: 10, event: "rank_known", step: null, message: null, details: { rank: 0, world_size: 2, local_rank: 0 } },
      { t: 0.2, kind: "event", pid: 11, event: "rank_known", step: null, message: null, details: { rank: 1, world_size: 2, local_rank: null } },
    );
    const m = readTimeline(entries).measured;
    expect(m.steps).toBe(10);
    expect(m.ranks.map((r) => [r.rank, r.local_rank, r.pid])).toEqual([
      [0, 0, 10],
      [1, null, 11],
    ]);
    expect(m.samples_per_s).toBeCloseTo(150, 9);
  });

  it("leaves a single process (or one rank) as it was", () => {
    const m = readTimeline(ranks(10, 1)).measured;
    expect(m.ranks).toEqual([]);
    expect(m.steps).toBe(10);
    expect(m.samples_per_s).toBeCloseTo(100, 9);
  });
});
