import { describe, expect, it } from "vitest";
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
