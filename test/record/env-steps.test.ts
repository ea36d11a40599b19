import { describe, expect, it } from "vitest";
import { readTimeline, summaryOf } from "../../src/record/timeline/index.ts";
import type { TimelineEntry } from "../../src/record/types.ts";

// An RL job on vector environments: each step's report carries the environment steps so far
// (extra.env_steps, from the attach's SB3/Gymnasium hook). The run's summary gives their rate over the
// steady steps beside samples/s: 4 environments × 128 steps a rollout, one rollout every 8 updates.
function rlTimeline(withEnv: boolean): TimelineEntry[] {
  const entries: TimelineEntry[] = [];
  let t = 100;
  for (let step = 0; step < 24; step++) {
    t += 0.25;
    const envSteps = 512 * (Math.floor(step / 8) + 1);
    entries.push({
      t,
      kind: "step",
      pid: 7,
      step,
      samples: 64,
      wait_s: 0.05,
      compute_s: 0.2,
      warmup: step < 2,
      source: "attach",
      ...(withEnv ? { extra: { env_steps: envSteps } } : {}),
    });
  }
  return entries;
}

describe("environment steps/s in a run's summary", () => {
  it("is the growth of the environment steps between the first and the last steady step, over their time", () => {
    const summary = summaryOf(readTimeline(rlTimeline(true)), { treeGpuBytes: null, treeRssBytes: null }, 6);
    // steady steps 2..23: 512 at step 2, 1536 at step 23, 21 steps of 0.25 s apart
    expect(summary.env_steps_per_s).toBeCloseTo(1024 / (21 * 0.25), 6);
    expect(summary.samples_per_s).toBeCloseTo(64 / 0.25, 6);
  });

  it("is null for a job without vector environments", () => {
    expect(summaryOf(readTimeline(rlTimeline(false)), { treeGpuBytes: null, treeRssBytes: null }, 6).env_steps_per_s).toBeNull();
  });
});
