import { describe, expect, it } from "vitest";
import { diagnose } from "../../../src/analyze/doctor/index.ts";
import type { TimelineEntry } from "../../../src/record/types.ts";
import { syntheticRun } from "../synthetic.ts";

// Two DDP ranks, 30 steps each: `own` and `wait` give each rank's seconds of own work and data wait;
// backward (where the all-reduce waits for the slowest rank) fills the step up to the slowest.
function ranks(own: [number, number], wait: [number, number] = [0.001, 0.001]): TimelineEntry[] {
  const entries: TimelineEntry[] = [{ t: 0, kind: "start", pid: 1 }];
  for (const rank of [0, 1]) entries.push({ t: 0.1, kind: "hello", pid: 10 + rank, role: "main", rank, local_rank: rank });
  const step = Math.max(own[0] + wait[0], own[1] + wait[1]) + 0.01;
  for (let i = 0; i < 30; i++)
    for (const rank of [0, 1])
      entries.push({
        t: 1 + (i + 1) * step,
        kind: "step",
        pid: 10 + rank,
        step: i,
        samples: 16,
        wait_s: wait[rank],
        compute_s: step - (wait[rank] ?? 0),
        backward_s: step - (wait[rank] ?? 0) - (own[rank] ?? 0),
        warmup: i < 3,
        source: "attach",
      });
  return entries;
}

const doctor = (entries: TimelineEntry[]) => diagnose(syntheticRun({ gpu: null }).meta, entries);

describe("doctor check: ranks", () => {
  it("finds the rank slower at its own work (outside backward, where the all-reduce waits)", () => {
    const f = doctor(ranks([0.001, 0.021])).findings.find((x) => x.id === "ranks");
    expect(f?.title).toBe("Straggler: rank 1 is slower; the others wait for it");
    expect(f?.summary).toMatch(/Rank 1 spends 21\.0 ms a step on its own work .* against 1\.00 ms/);
  });

  it("finds the rank that waits for data", () => {
    const f = doctor(ranks([0.001, 0.001], [0.001, 0.02])).findings.find((x) => x.id === "ranks");
    expect(f?.title).toBe("Straggler: rank 1 waits for data; the others wait for it");
  });

  it("passes ranks in step, and stays silent for a single process", () => {
    expect(doctor(ranks([0.001, 0.0012])).passed.find((p) => p.check === "ranks")?.why).toMatch(/2 ranks in step/);
    const single = ranks([0.001, 0.001]).filter((e) => e.pid !== 11);
    expect(doctor(single).passed.find((p) => p.check === "ranks")?.why).toMatch(/a single process/);
  });

  it("calls every rank stalled a collective hang and names the rank that was elsewhere", () => {
    const entries = ranks([0.001, 0.001]);
    entries.push({
      t: 100,
      kind: "event",
      event: "ranks_stalled",
      pid: 1,
      step: 30,
      message: "all 2 ranks stalled: no training step on any rank for 31 s (limit 30 s); rank 0 at step 30, rank 1 at step 30",
      details: {
        quiet_s: 31,
        ranks: [
          {
            pid: 10,
            rank: 0,
            steps: 30,
            top_frame: 'File "/v/site-packages/torch/autograd/graph.py", line 979 in _engine_run_backward',
            stack_file: "s/stacks-10.txt",
          },
          { pid: 11, rank: 1, steps: 30, top_frame: 'File "train.py", line 41 in <module>', stack_file: "s/stacks-11.txt" },
        ],
      },
    });
    const f = doctor(entries).findings.find((x) => x.id === "ranks");
    expect(f?.title).toBe("Collective hang: all ranks stalled");
    expect(f?.severity).toBe("high");
    expect(f?.summary).toMatch(/Rank 1 was elsewhere \(File "train.py", line 41 in <module>\)/);
    expect(f?.fix.summary).toBe("make rank 1 reach the collective the others wait in");
  });
});
