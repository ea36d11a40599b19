import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { openDevices, startSampler, type Devices, type Reading } from "../../src/devices/index.ts";
import { scaled } from "../helpers/time.ts";

function fakeDevices(readMs: number): Devices & { reads: number; maxConcurrent: number } {
  let running = 0;
  const devices = {
    reads: 0,
    maxConcurrent: 0,
    inventory: () => ({
      backend: "cpu" as const,
      note: null,
      driver: null,
      cuda: null,
      gpus: [],
      host: { cpus: 1, usableCpus: 1, memTotalBytes: 1, cpuModel: null },
    }),
    async read(rootPid: number | null): Promise<Reading> {
      devices.reads++;
      running++;
      devices.maxConcurrent = Math.max(devices.maxConcurrent, running);
      await new Promise((r) => setTimeout(r, readMs));
      running--;
      return {
        t: Date.now() / 1000,
        gpus: [],
        tree: rootPid === null ? null : { rootPid, pids: [rootPid], rssBytes: 1, cpuPercent: null, gpuBytes: null },
        host: { memAvailableBytes: 1, cpuPercent: null },
      };
    },
    close: () => {},
  };
  return devices;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `done()` or the scaled limit; the seconds it waited. A busy machine fires timers late: no count is judged against a fixed window. */
async function waitUntil(done: () => boolean, limitMs = 10_000): Promise<number> {
  const started = performance.now();
  const deadline = started + scaled(limitMs);
  while (!done() && performance.now() < deadline) await sleep(10);
  return (performance.now() - started) / 1000;
}

describe("startSampler", () => {
  it("reads at the rate asked at most, and stop() stops", async () => {
    const devices = fakeDevices(1);
    const readings: Reading[] = [];
    const sampler = startSampler(devices, { rootPid: 42, hz: 20, onReading: (r) => readings.push(r) });
    const waited = await waitUntil(() => readings.length >= 12);
    await sampler.stop();
    const count = readings.length;
    expect(count).toBeGreaterThanOrEqual(12);
    // never faster than 20 Hz (a busy machine only makes it slower)
    expect(count).toBeLessThanOrEqual(Math.floor(waited * 20) + 2);
    expect(sampler.latest()).toBe(readings.at(-1));
    expect(sampler.latest()?.tree?.rootPid).toBe(42);
    await sleep(200);
    expect(readings.length).toBe(count);
    expect(sampler.counts()).toMatchObject({ readings: count, errors: 0 });
  });

  it("never overlaps reads: a tick during a slow read is skipped", async () => {
    const devices = fakeDevices(120);
    const sampler = startSampler(devices, { rootPid: null, hz: 50, onReading: () => {} });
    const waited = await waitUntil(() => sampler.counts().skipped > 10);
    await sampler.stop();
    expect(devices.maxConcurrent).toBe(1);
    expect(sampler.counts().skipped).toBeGreaterThan(10);
    // one read at a time, each at least 120 ms
    expect(devices.reads).toBeLessThanOrEqual(Math.floor(waited / 0.12) + 1);
  });

  it("goes on after a failed read and reports it", async () => {
    const devices = fakeDevices(1);
    let calls = 0;
    const errors: unknown[] = [];
    const flaky: Devices = { ...devices, read: (pid) => (++calls === 2 ? Promise.reject(new Error("boom")) : devices.read(pid)) };
    const sampler = startSampler(flaky, { rootPid: null, hz: 50, onReading: () => {}, onError: (e) => errors.push(e) });
    await waitUntil(() => sampler.counts().readings > 2);
    await sampler.stop();
    expect(errors).toHaveLength(1);
    expect(sampler.counts().readings).toBeGreaterThan(2);
  });

  it("refuses a rate that is not a positive number", () => {
    expect(() => startSampler(fakeDevices(1), { rootPid: null, hz: 0, onReading: () => {} })).toThrow(/positive/);
  });

  it("follows a real process tree at 10 Hz through openDevices", async () => {
    const child = spawn("sh", ["-c", "sleep 30 & sleep 30 & wait"], { stdio: "ignore", detached: true });
    const devices = openDevices({ smiPath: null });
    try {
      const readings: Reading[] = [];
      const sampler = startSampler(devices, { rootPid: child.pid ?? null, onReading: (r) => readings.push(r) });
      await waitUntil(() => readings.length >= 4 && readings.at(-1)?.tree?.pids.length === 3);
      await sampler.stop();
      expect(readings.length).toBeGreaterThanOrEqual(4);
      const last = readings.at(-1);
      expect(last?.tree?.pids).toHaveLength(3);
      expect(last?.tree?.cpuPercent).not.toBeNull();
      expect(last?.host.cpuPercent).not.toBeNull();
    } finally {
      devices.close();
      process.kill(-(child.pid ?? 0), "SIGKILL");
    }
  });
});
