import { describe, expect, it } from "vitest";
import { LiveTracker } from "../../src/guard/live.ts";
import { smallerMicroBatch } from "../../src/guard/oom-restart.ts";
import { describeStall, Steppers, topFrame } from "../../src/job/ranks.ts";

describe("ranks: stalls", () => {
  it("counts a stall only when every stepping process is quiet, and names each rank's step", () => {
    const s = new Steppers();
    for (const rank of [0, 1]) s.message({ v: 1, type: "hello", t: 0, pid: 10 + rank, role: "main", rank, local_rank: rank }, 0);
    s.message({ v: 1, type: "hello", t: 0, pid: 30, role: "loader_worker", rank: 0 }, 0);
    expect(s.ranks).toBe(2);
    expect(s.stalled(100, 5)).toBeNull(); // nobody stepped yet: starting up is not a hang
    s.message({ v: 1, type: "step", t: 1, pid: 10 }, 1);
    s.message({ v: 1, type: "step", t: 1, pid: 11 }, 1);
    s.message({ v: 1, type: "step", t: 8, pid: 11 }, 8);
    expect(s.stalled(10, 5)).toBeNull(); // rank 1 stepped 2 s ago
    const stall = s.stalled(14, 5);
    expect(stall?.quietS).toBe(6);
    expect(describeStall(stall as NonNullable<typeof stall>, 5)).toBe(
      "all 2 ranks stalled: no training step on any rank for 6 s (limit 5 s); rank 0 at step 1, rank 1 at step 2",
    );
  });

  it("reads the main thread's innermost frame from a faulthandler dump (threads newest first)", () => {
    const dump = [
      "Thread 0x00007f6e06bff6c0 (most recent call first):",
      '  File "/x/brim/_tracking.py", line 76 in _flush_held',
      '  File "/usr/lib/python3.11/threading.py", line 982 in run',
      "",
      "Current thread 0x00007f6e2ebd9b80 (most recent call first):",
      '  File "/x/torch/autograd/graph.py", line 979 in _engine_run_backward',
      '  File "train.py", line 43 in <module>',
      "",
    ].join("\n");
    expect(topFrame(dump)).toBe('File "/x/torch/autograd/graph.py", line 979 in _engine_run_backward');
    expect(topFrame("")).toBeNull();
  });
});

describe("ranks: the next round's micro-batch after an out-of-memory", () => {
  it("halves the micro-batch and doubles accumulation: the same samples per optimizer step on every rank", () => {
    const plan = smallerMicroBatch({ batch_size: 32 }, { batch_size: 32, lr: 0.1 });
    expect(plan).toMatchObject({ knobs: { batch_size: 16, accumulation: 2, lr: 0.1 } });
    expect(smallerMicroBatch({ batch_size: 16, accumulation: 2 }, { batch_size: 16, accumulation: 2 })).toMatchObject({
      knobs: { batch_size: 8, accumulation: 4 },
    });
  });

  it("keeps the samples per step whole when the micro-batch does not halve evenly", () => {
    expect(smallerMicroBatch({ batch_size: 6, accumulation: 1 }, {})).toMatchObject({ knobs: { batch_size: 3, accumulation: 2 } });
    expect(smallerMicroBatch({ batch_size: 5, accumulation: 1 }, {})).toMatchObject({ knobs: { batch_size: 1, accumulation: 5 } });
    expect(smallerMicroBatch({ batch_size: 10, accumulation: 3 }, {})).toMatchObject({ knobs: { batch_size: 5, accumulation: 6 } });
  });

  it("decides once per round: a second rank out of memory with the old micro-batch changes nothing", () => {
    expect(smallerMicroBatch({ batch_size: 32 }, { batch_size: 16, accumulation: 2 })).toEqual({ already: true });
  });

  it("says why when there is nothing to lower", () => {
    expect(smallerMicroBatch({}, {})).toMatchObject({ reason: expect.stringMatching(/reads no batch_size knob/) as unknown });
    expect(smallerMicroBatch({ batch_size: 1 }, {})).toMatchObject({ reason: expect.stringMatching(/none smaller/) as unknown });
  });
});

describe("ranks: the live state (the view, /metrics)", () => {
  it("gives the job's samples/s as the sum of the ranks' own, each rank beside it; a restarted rank replaces its process", () => {
    const live = new LiveTracker({ startedAt: 0, capBytes: null, capScope: "ram", totalSteps: null });
    const hello = (pid: number, rank: number) =>
      live.message({ v: 1, type: "hello", t: 0, pid, role: "main", rank, local_rank: rank, group_rank: 0, launch_id: "job42" });
    const step = (pid: number, i: number, compute: number) =>
      live.message({ v: 1, type: "step", t: 1 + i, pid, step: i, samples: 10, wait_s: 0, compute_s: compute, warmup: i < 1 });
    hello(10, 0);
    hello(11, 1);
    for (let i = 0; i < 5; i++) {
      step(11, i, 0.2); // rank 1: 50 samples/s
      step(10, i, 0.1); // rank 0: 100 samples/s
    }
    let state = live.snapshot(10);
    expect(state.samplesPerS).toBeCloseTo(150, 9);
    expect(state.ranks?.map((r) => [r.rank, r.localRank, r.pid, r.steps, Math.round(r.samplesPerS ?? 0)])).toEqual([
      [0, 0, 10, 5, 100],
      [1, 1, 11, 5, 50],
    ]);
    hello(21, 1); // round 2 of a torchrun restart
    for (let i = 0; i < 3; i++) {
      step(21, i, 0.4); // 25 samples/s
      step(10, 5 + i, 0.1);
    }
    state = live.snapshot(20);
    expect(state.ranks?.map((r) => r.pid)).toEqual([10, 21]);
    expect(state.ranks?.map((r) => [r.node, r.launchId])).toEqual([
      [0, "job42"],
      [0, "job42"],
    ]);
    expect(state.samplesPerS).toBeCloseTo(125, 9);
  });
});
