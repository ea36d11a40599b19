import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { openDevices, startSampler, type Devices, type Reading } from "../../src/devices/index.ts";

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

describe("startSampler", () => {
  it("reads at roughly the rate asked, and stop() stops", async () => {
    const devices = fakeDevices(1);
    const readings: Reading[] = [];
    const sampler = startSampler(devices, { rootPid: 42, hz: 20, onReading: (r) => readings.push(r) });
    await sleep(1000);
    await sampler.stop();
    const count = readings.length;
    expect(count).toBeGreaterThanOrEqual(12);
    expect(count).toBeLessThanOrEqual(23);
    expect(sampler.latest()).toBe(readings.at(-1));
    expect(sampler.latest()?.tree?.rootPid).toBe(42);
    await sleep(200);
    expect(readings.length).toBe(count);
    expect(sampler.counts()).toMatchObject({ readings: count, errors: 0 });
  });

  it("never overlaps reads: a tick during a slow read is skipped", async () => {
    const devices = fakeDevices(120);
    const sampler = startSampler(devices, { rootPid: null, hz: 50, onReading: () => {} });
    await sleep(600);
    await sampler.stop();
    expect(devices.maxConcurrent).toBe(1);
    expect(sampler.counts().skipped).toBeGreaterThan(10);
    expect(devices.reads).toBeLessThanOrEqual(6);
  });

  it("goes on after a failed read and reports it", async () => {
    const devices = fakeDevices(1);
    let calls = 0;
    const errors: unknown[] = [];
    const flaky: Devices = { ...devices, read: (pid) => (++calls === 2 ? Promise.reject(new Error("boom")) : devices.read(pid)) };
    const sampler = startSampler(flaky, { rootPid: null, hz: 50, onReading: () => {}, onError: (e) => errors.push(e) });
    await sleep(200);
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
      await sleep(700);
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
