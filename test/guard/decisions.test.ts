import { describe, expect, it } from "vitest";
import type { Reading } from "../../src/devices/index.ts";
import { BrimError } from "../../src/errors/index.ts";
import { channelRefusedEntry, guardFailure, withOomAdvice, withStoreLoss } from "../../src/guard/finish.ts";
import { cappedBytes, isReapingReading, liveReadingOf, peaksAfter } from "../../src/guard/reading.ts";
import { signalDecision } from "../../src/guard/signals.ts";
import type { JobResult } from "../../src/job/runner.ts";

const reading = (tree: Reading["tree"], gpus: Partial<Reading["gpus"][number]>[] = []): Reading =>
  ({ t: 10, tree, host: { memAvailableBytes: 1, cpuPercent: null }, gpus }) as Reading;
const tree = (rss: number, pss: number | null, gpu: number | null, pids = [1]): NonNullable<Reading["tree"]> => ({
  rootPid: 1,
  pids,
  rssBytes: rss,
  pssBytes: pss,
  cpuPercent: 50,
  gpuBytes: gpu,
});
const ended = (cause: JobResult["end"]["cause"], channel: Partial<JobResult["channel"]> = {}): JobResult =>
  ({
    end: { cause, exit_code: 1, signal: null, message: "it ended" },
    pid: 1,
    startedAt: 0,
    endedAt: 5,
    tail: [],
    steps: 0,
    interruptedBy: null,
    channel: { refused: 0, overflowed: 0, admittedByPid: {}, ...channel },
  }) as JobResult;

describe("the guard's decisions on a reading", () => {
  it("ignores a reaping reading, keeps peaks (RAM only while the tree lives), caps PSS in RAM mode and GPU bytes in GPU mode", () => {
    expect(isReapingReading(reading(tree(0, null, null)))).toBe(true);
    expect(isReapingReading(reading(null))).toBe(false);
    let peaks = peaksAfter({ gpu: null, rss: null, pss: null }, reading(tree(100, 60, 7)));
    peaks = peaksAfter(peaks, reading(tree(500, 400, 3, [])));
    expect(peaks).toEqual({ gpu: 7, rss: 100, pss: 60 });
    expect(cappedBytes(reading(tree(100, 60, 7)), "ram")).toBe(60);
    expect(cappedBytes(reading(tree(100, null, 7)), "ram")).toBe(100);
    expect(cappedBytes(reading(tree(100, 60, 7)), "gpu")).toBe(7);
    const gpus = [
      { index: 0, util: 40, smActivity: null, powerW: 100, usedBytes: 1 },
      { index: 1, util: null, smActivity: null, powerW: 50, usedBytes: 2 },
    ];
    const live = liveReadingOf(reading(tree(100, 60, 7), gpus), 7);
    expect([live.gpuUtil, live.smActivity, live.powerW, live.processes]).toEqual([40, null, 150, 1]);
  });
});

describe("the guard's decisions on signals and at the end", () => {
  it("passes SIGINT on, stops on SIGHUP, or ignores it when the job may outlive brim", () => {
    expect(signalDecision("SIGINT", false, 1).send).toBe("SIGINT");
    expect(signalDecision("SIGHUP", false, 1).send).toBe("SIGTERM");
    const kept = signalDecision("SIGHUP", true, 1);
    expect([kept.send, kept.entry.event]).toEqual([null, "sighup_ignored"]);
  });

  it("stops for an I/O failure as store_failed and for anything else as guard_failed", () => {
    expect(guardFailure(Object.assign(new Error("full"), { code: "ENOSPC" })).reason).toBe("store_failed");
    expect(guardFailure(new BrimError("E_IO", "disk full")).detail).toBe("disk full");
    expect(guardFailure(new Error("boom")).reason).toBe("guard_failed");
  });

  it("records refused connections, names the OOM knobs on a failed end only, and marks a lost record", () => {
    expect(channelRefusedEntry(ended("ok"))).toBeNull();
    expect(channelRefusedEntry(ended("ok", { refused: 2 }))?.details).toMatchObject({ refused: 2, overflowed: 0 });
    expect(withOomAdvice(ended("ok"), { batch_size: 8 }).end.message).toBe("it ended");
    expect(withOomAdvice(ended("crashed"), { batch_size: 8 }).end.message).toContain("--knob batch_size=8");
    const lost = withStoreLoss(ended("crashed"), { error: new BrimError("E_IO", "disk full"), entriesLost: 3, outputLinesLost: 1 });
    expect(lost.end.cause).toBe("store_failed");
    expect(lost.end.message).toBe("disk full; the record is incomplete (3 timeline entries and 1 output lines not recorded)");
  });
});
