// Human units in the live view and the status line; no bar glyphs off a terminal.
import { describe, expect, it } from "vitest";
import { formatBytes } from "../../src/bytes.ts";
import type { LiveState } from "../../src/guard/live.ts";
import { renderLiveView, renderStatusLine } from "../../src/metrics/view.ts";

const base: LiveState = {
  elapsedS: 75,
  steps: 30,
  totalSteps: 30,
  samplesPerS: 48_213.7,
  waitShare: 0.041,
  etaS: 0,
  memUsedBytes: 7.1 * 2 ** 30,
  memPeakBytes: 7.4 * 2 ** 30,
  capBytes: 12 * 2 ** 30,
  capScope: "gpu",
  gpuUtil: 97,
  smActivity: 61,
  powerW: 280.4,
  cpuPercent: null,
  processes: 3,
  microBatch: 64,
  accumulation: 2,
  loss: 0.41234,
  oomRecoveries: 0,
  shrinkRequests: 0,
  lastEvent: null,
};

describe("human units", () => {
  it("formats a fraction of a byte (a fitted slope) with 3 significant digits", () => {
    expect(formatBytes(1.2105400934595054)).toBe("1.21 B");
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(12884901888)).toBe("12.0 GiB");
  });

  it("shows rates in k / M, bytes in binary units, times as durations", () => {
    const lines = renderLiveView(base, { color: false, width: 200 });
    expect(lines[0]).toBe("brim ▸ step 30/30 · 48.2k samples/s · ETA 0s · elapsed 1m15s");
    expect(lines[1]).toMatch(/ 7\.10 GiB \/ 12\.0 GiB GPU \(peak 7\.40 GiB\) · util 97% · SM 61% · 280 W$/);
    expect(lines[2]).toBe("  data wait 4% · micro-batch 64 × 2 · loss 0.4123");
    expect(renderLiveView({ ...base, samplesPerS: 2_500_000 }, { color: false, width: 200 })[0]).toContain("2.50M samples/s");
    expect(renderLiveView({ ...base, samplesPerS: 412.3 }, { color: false, width: 200 })[0]).toContain("412 samples/s");
  });

  it("prints no bar glyphs in the plain status line used off a terminal", () => {
    const line = renderStatusLine(base);
    expect(line).toBe("brim: step 30/30 · 48.2k samples/s · memory 7.10 GiB/12.0 GiB GPU · wait 4% · util 97% · ETA 0s");
    expect(line).not.toMatch(/[░█▏▎▍▌▋▊▉]/);
  });
});
