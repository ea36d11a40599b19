import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { RunStore } from "../../src/record/store.ts";
import {
  loadTimeline,
  loadTimelineSpread,
  MAX_SAMPLES,
  MAX_STEPS_PER_PROCESS,
  mainProcessPid,
  parseTimelineLine,
  readTimeline,
  stepSeconds,
  timelineEntries,
} from "../../src/record/timeline/index.ts";
import type { TimelineEntry } from "../../src/record/types.ts";

const root = mkdtempSync(join(tmpdir(), "brim-timeline-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const step = (t: number, pid: number, extra: Record<string, unknown> = {}): TimelineEntry => ({
  t,
  kind: "step",
  pid,
  step: 0,
  samples: 10,
  wait_s: 0.1,
  compute_s: 0.4,
  ...extra,
});

describe("reading a timeline file", () => {
  it("streams whole lines and ignores a torn last line, a blank line and garbage", async () => {
    const path = join(root, "torn.ndjson");
    writeFileSync(path, `${JSON.stringify({ t: 1, kind: "start", pid: 4 })}\n\nnot json\n${JSON.stringify(step(2, 4))}\n{"t":3,"kind":"step","pid":4,"sa`);
    const seen: TimelineEntry[] = [];
    let offset = -1;
    for await (const e of timelineEntries(path, { onOffset: (o) => (offset = o) })) seen.push(e);
    expect(seen.map((e) => e.kind)).toEqual(["start", "step"]);
    // the follower resumes at the torn line, and reads it once it is whole
    appendFileSync(path, 'mples":10}\n');
    const rest: TimelineEntry[] = [];
    for await (const e of timelineEntries(path, { from: offset })) rest.push(e);
    expect(rest).toEqual([{ t: 3, kind: "step", pid: 4, samples: 10 }]);
  });

  it("a torn line that happens to parse is still not read (no newline yet)", async () => {
    const path = join(root, "parsable-tail.ndjson");
    writeFileSync(path, `${JSON.stringify({ t: 1, kind: "start", pid: 4 })}\n{"t":2,"kind":"end"}`);
    expect((await loadTimeline(path)).end).toBeNull();
  });

  it("a missing file is an empty timeline", async () => {
    const tl = await loadTimeline(join(root, "nope.ndjson"));
    expect(tl.measured.steps).toBe(0);
    expect(tl.mainPid).toBeNull();
  });

  it("parses only objects with a numeric t and a string kind", () => {
    expect(parseTimelineLine('{"t":1,"kind":"x"}')).toEqual({ t: 1, kind: "x" });
    expect(parseTimelineLine('{"t":"1","kind":"x"}')).toBeNull();
    expect(parseTimelineLine("[1]")).toBeNull();
    expect(parseTimelineLine("   ")).toBeNull();
  });
});

describe("the definitions", () => {
  it("a step without wait or compute time counts as a step, not in throughput or data wait", () => {
    const tl = readTimeline([
      { t: 0, kind: "start", pid: 1 },
      step(1, 1),
      step(2, 1, { wait_s: null, compute_s: null, samples: 1000 }),
      step(3, 1, { wait_s: undefined, compute_s: 0.5 }),
    ]);
    expect(tl.measured.steps).toBe(3);
    expect(tl.measured.steady_steps).toBe(3);
    expect(tl.measured.samples).toBe(1020);
    expect(tl.measured.steady_samples).toBe(20);
    expect(tl.measured.samples_per_s).toBeCloseTo(20 / 1.0, 12);
    expect(tl.measured.data_wait_share).toBeCloseTo(0.1 / 1.0, 12);
    expect(stepSeconds({ wait_s: null, compute_s: null })).toBeNull();
  });

  it("steady steps are the main process's only; a worker's steps count in `steps`", () => {
    const entries: TimelineEntry[] = [{ t: 0, kind: "start", pid: 1 }];
    for (let i = 1; i <= 5; i++) entries.push(step(i, 1));
    for (let i = 1; i <= 50; i++) entries.push(step(i / 10, 2, { samples: 1, compute_s: 0.01, wait_s: 0 }));
    const tl = readTimeline(entries);
    expect(tl.mainPid).toBe(1);
    expect(tl.measured.steps).toBe(55);
    expect(tl.measured.steady_steps).toBe(5);
    expect(tl.measured.samples_per_s).toBeCloseTo(50 / 2.5, 12);
  });

  it("the main process: rank 0, else the started one, else the only `main`, else the most steps", () => {
    const counts = new Map([
      [10, 5],
      [11, 9],
    ]);
    expect(mainProcessPid({ startPid: 10, stepCounts: counts, hellos: [{ pid: 11, rank: 0, role: null }] })).toBe(11);
    expect(mainProcessPid({ startPid: 10, stepCounts: counts, hellos: [] })).toBe(10);
    expect(mainProcessPid({ startPid: 1, stepCounts: counts, hellos: [{ pid: 10, rank: null, role: "main" }] })).toBe(10);
    expect(mainProcessPid({ startPid: 1, stepCounts: counts, hellos: [] })).toBe(11);
    expect(mainProcessPid({ startPid: 1, stepCounts: new Map(), hellos: [] })).toBe(1);
  });

  it("says who measured throughput; a missing source is the SDK", () => {
    expect(readTimeline([step(1, 1), step(2, 1)]).measured.throughput_source).toBe("sdk");
    expect(readTimeline([step(1, 1, { source: "progress" }), step(2, 1, { source: "progress" })]).measured.throughput_source).toBe("progress");
    expect(readTimeline([step(1, 1, { warmup: true })]).measured.throughput_source).toBeNull();
  });

  it("GPU means cover the job's GPUs in the steady window, all readings when the window holds none", () => {
    const gpus = (util0: number) => [
      { index: 0, used_bytes: 1e9 + util0, util: util0 },
      { index: 1, used_bytes: 5e9, util: 0 },
    ];
    const entries: TimelineEntry[] = [
      { t: 0.5, kind: "sample", tree: null, gpus: gpus(10) },
      { t: 1.2, kind: "sample", tree: null, gpus: gpus(90) },
      step(1.5, 1),
      { t: 1.7, kind: "sample", tree: null, gpus: gpus(70) },
      step(2, 1),
      { t: 2.6, kind: "sample", tree: null, gpus: gpus(5) },
    ];
    expect(readTimeline(entries).measured.gpu_indexes).toEqual([0]);
    expect(readTimeline(entries).measured.gpu_util_mean).toBeCloseTo(80, 12);
    expect(readTimeline(entries.filter((e) => e.kind === "sample")).measured.gpu_util_mean).toBeCloseTo((10 + 90 + 70 + 5) / 4, 12);
  });
});

describe("bounded memory", () => {
  it("thins long lists evenly while the measures stay exact", () => {
    const n = MAX_STEPS_PER_PROCESS * 3;
    const entries: TimelineEntry[] = [{ t: 0, kind: "start", pid: 1 }];
    for (let i = 1; i <= n; i++) entries.push(step(i, 1, { samples: i % 2 === 0 ? 10 : 20 }));
    for (let i = 0; i < MAX_SAMPLES * 2 + 5; i++) entries.push({ t: i / 2, kind: "sample", tree: { rss_bytes: 1e9 + i }, gpus: [] });
    const tl = readTimeline(entries);
    expect(tl.thinned).toBe(true);
    expect(tl.steps.length).toBeLessThan(MAX_STEPS_PER_PROCESS);
    expect(tl.samples.length).toBeLessThan(MAX_SAMPLES);
    expect(tl.measured.steady_steps).toBe(n);
    expect(tl.measured.samples).toBe(15 * n);
    expect(tl.measured.peak_tree_rss_bytes).toBe(1e9 + MAX_SAMPLES * 2 + 4);
    const gaps = new Set(tl.steps.slice(1).map((s, i) => s.t - (tl.steps[i]?.t ?? 0)));
    expect(gaps.size).toBe(1);
  });

  it("reads evenly spread parts of a file past the budget, and says so", async () => {
    const store = new RunStore(join(root, "spread"));
    const path = join(root, "spread.ndjson");
    const lines = [JSON.stringify({ t: 0, kind: "start", pid: 1 })];
    for (let i = 1; i <= 20000; i++) lines.push(JSON.stringify(step(i, 1)));
    lines.push(JSON.stringify({ t: 20001, kind: "end", cause: "ok" }));
    writeFileSync(path, `${lines.join("\n")}\n`);
    const { timeline, offset, size } = await loadTimelineSpread(path, { budgetBytes: 64 * 1024, parts: 16 });
    expect(store.root).toBeDefined();
    expect(timeline.sampled).toBe(true);
    expect(timeline.start?.pid).toBe(1);
    expect(timeline.end?.cause).toBe("ok");
    expect(offset).toBe(size);
    expect(timeline.steps.length).toBeGreaterThan(100);
    expect(timeline.steps.length).toBeLessThan(2000);
    const whole = await loadTimelineSpread(path, { budgetBytes: size });
    expect(whole.timeline.sampled).toBe(false);
    expect(whole.timeline.measured.steps).toBe(20000);
  });
});

describe("steps read from progress lines", () => {
  it("measure throughput only while the SDK and the attach layer reported no step", () => {
    const progressOnly = readTimeline([
      { t: 0, kind: "start", pid: 4 },
      step(1, 4, { source: "progress", samples: 20 }),
      step(2, 4, { source: "progress", samples: 20 }),
    ]);
    expect(progressOnly.measured.throughput_source).toBe("progress");
    expect(progressOnly.measured.steps).toBe(2);
    expect(progressOnly.measured.samples_per_s).toBeCloseTo(40 / 1.0);

    const mixed = readTimeline([
      { t: 0, kind: "start", pid: 4 },
      step(1, 4, { source: "progress", samples: 999 }),
      step(2, 4, { source: "attach" }),
      step(3, 4, { source: "attach" }),
    ]);
    expect(mixed.measured.throughput_source).toBe("attach");
    expect(mixed.measured.steps).toBe(2);
    expect(mixed.measured.samples).toBe(20);
    expect(mixed.steps.every((s) => s.source === "attach")).toBe(true);
  });
});
