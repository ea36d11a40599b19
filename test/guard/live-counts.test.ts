import { describe, expect, it } from "vitest";
import type { ChannelMessage } from "../../src/job/channel.ts";
import { LiveTracker } from "../../src/guard/live.ts";

const step = (i: number, source: "attach" | "progress", samples: number | null): ChannelMessage =>
  ({
    v: 1,
    type: "step",
    pid: 4242,
    t: 100 + i * 0.1,
    step: i,
    samples,
    wait_s: null,
    compute_s: 0.1,
    source,
    warmup: i < 3,
    micro_batch: samples,
    accumulation: null,
    loss: null,
    mem: null,
  }) as unknown as ChannelMessage;

describe("the live view counts what the summary counts", () => {
  it("drops the steps a sanity-check progress bar gave once the attach reports, as the summary does", () => {
    const live = new LiveTracker({ startedAt: 100, capBytes: null, capScope: "ram", totalSteps: 15 });
    live.started(100, 4242);
    // recorded from Lightning: the sanity check's bar (2 batches) read as steps before the attach's first step
    live.message(step(1, "progress", null));
    live.message(step(2, "progress", null));
    expect(live.snapshot(101).steps).toBe(2);
    const seen: number[] = [];
    for (let i = 0; i < 15; i++) {
      live.message(step(i, "attach", 8));
      seen.push(live.snapshot(102 + i).steps);
      // the epoch's bar goes on printing: never counted beside the attach
      live.message(step(100 + i, "progress", null));
    }
    expect(seen).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
    expect(live.snapshot(120).steps).toBe(15);
    expect(live.snapshot(120).samplesPerS).toBeGreaterThan(0);
  });

  it("counts progress-line steps while they are all there is", () => {
    const live = new LiveTracker({ startedAt: 100, capBytes: null, capScope: "ram", totalSteps: null });
    live.started(100, 4242);
    for (let i = 1; i <= 5; i++) live.message(step(i, "progress", null));
    expect(live.snapshot(102).steps).toBe(5);
  });
});
