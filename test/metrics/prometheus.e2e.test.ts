// Prometheus exposition: names and units per the conventions, build info, the gpu label; and the
// endpoint of the built CLI kept up for the grace period after the run so the last scrape lands.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { LiveState } from "../../src/guard/live.ts";
import { formatPrometheus } from "../../src/metrics/prometheus.ts";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-prom-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const state: LiveState = {
  elapsedS: 30.5,
  steps: 120,
  totalSteps: 500,
  samplesPerS: 412.5,
  waitShare: 0.04,
  etaS: 62,
  memUsedBytes: 7 * 2 ** 30,
  memPeakBytes: 7.5 * 2 ** 30,
  capBytes: 12 * 2 ** 30,
  capScope: "gpu",
  gpuUtil: 97,
  smActivity: 61,
  powerW: 280,
  cpuPercent: 150,
  processes: 5,
  microBatch: 64,
  accumulation: 2,
  loss: 0.41,
  oomRecoveries: 1,
  shrinkRequests: 0,
  lastEvent: null,
};

function parse(text: string): { samples: Map<string, number>; types: Map<string, string> } {
  const samples = new Map<string, number>();
  const types = new Map<string, string>();
  for (const line of text.trim().split("\n")) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1] as string, type[2] as string);
    else if (!line.startsWith("#")) {
      const at = line.lastIndexOf(" ");
      samples.set(line.slice(0, at), Number(line.slice(at + 1)));
    }
  }
  return { samples, types };
}

async function scrape(port: number): Promise<string | null> {
  return new Promise((done) => {
    const req = request({ host: "127.0.0.1", port, path: "/metrics" }, (res) => {
      let text = "";
      res.on("data", (chunk: Buffer) => (text += chunk.toString()));
      res.on("end", () => done(text));
    });
    req.on("error", () => done(null));
    req.end();
  });
}

describe("Prometheus exposition", () => {
  it("uses base units, 0-1 ratios, _total counters, build info and a gpu label", () => {
    const { samples, types } = parse(
      formatPrometheus(state, { run_id: "r1" }, { gpus: [0, 1], running: true, build: { version: "0.1.0", nodejs: "v20.20.2" } }),
    );
    expect(samples.get('brim_build_info{run_id="r1",version="0.1.0",nodejs="v20.20.2"}')).toBe(1);
    expect(samples.get('brim_job_running{run_id="r1"}')).toBe(1);
    expect(samples.get('brim_gpu_utilization_ratio{run_id="r1",gpu="0,1"}')).toBeCloseTo(0.97, 10);
    expect(samples.get('brim_gpu_sm_activity_ratio{run_id="r1",gpu="0,1"}')).toBeCloseTo(0.61, 10);
    expect(samples.get('brim_gpu_power_watts{run_id="r1",gpu="0,1"}')).toBe(280);
    expect(samples.get('brim_memory_used_bytes{run_id="r1",scope="gpu"}')).toBe(7 * 2 ** 30);
    expect(samples.get('brim_data_wait_ratio{run_id="r1"}')).toBe(0.04);
    expect(samples.get('brim_cpu_cores{run_id="r1"}')).toBe(1.5);
    expect(samples.get('brim_eta_seconds{run_id="r1"}')).toBe(62);
    for (const [name, type] of types) {
      expect(name).toMatch(/^brim_[a-z_]+$/);
      expect(name).not.toMatch(/percent/);
      if (type === "counter") expect(name).toMatch(/_total$/);
      if (name.endsWith("_ratio")) for (const [k, v] of samples) if (k.startsWith(`${name}{`)) expect(v).toBeLessThanOrEqual(1);
    }
  });

  it("leaves out what it cannot measure, and GPU readings in CPU mode", () => {
    const { samples } = parse(
      formatPrometheus({ ...state, capScope: "ram", gpuUtil: null, smActivity: null, powerW: null, capBytes: null }, { run_id: "r1" }, { gpus: [] }),
    );
    expect([...samples.keys()].some((k) => k.startsWith("brim_gpu_"))).toBe(false);
    expect(samples.has('brim_memory_cap_bytes{run_id="r1",scope="ram"}')).toBe(false);
    expect(samples.get('brim_memory_used_bytes{run_id="r1",scope="ram"}')).toBe(7 * 2 ** 30);
    expect([...samples.keys()].some((k) => k.startsWith("brim_build_info"))).toBe(false);
  });

  it("keeps the built CLI's endpoint up for --prometheus-grace after the run, with the final numbers", async () => {
    const port = 20_000 + Math.floor(Math.random() * 1000);
    const script = "import time, brim\nfor _ in brim.track(range(40), samples=4):\n    time.sleep(0.01)";
    const child = spawn(
      process.execPath,
      [
        join(REPO, "bin", "brim.js"),
        "run",
        "--store",
        join(root, "store"),
        "--quiet",
        "--prometheus",
        String(port),
        "--prometheus-grace",
        "3",
        "--warmup",
        "1",
        "--",
        PYTHON,
        "-c",
        script,
      ],
      { cwd: root },
    );
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    const deadline = Date.now() + scaled(30_000);
    while (!/ended: ok/.test(stderr) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const endedAt = Date.now();
    const body = await scrape(port);
    expect(body).not.toBeNull();
    const { samples } = parse(body ?? "");
    const get = (name: string): number | undefined => [...samples.entries()].find(([k]) => k.startsWith(`${name}{`))?.[1];
    expect(get("brim_job_running")).toBe(0);
    expect(get("brim_steps_total")).toBe(40);
    expect([...samples.keys()].find((k) => k.startsWith("brim_build_info{"))).toMatch(/version="\d+\.\d+\.\d+",nodejs="v\d+/);
    expect(await exited).toBe(0);
    expect(Date.now() - endedAt).toBeGreaterThan(2000);
    expect(await scrape(port)).toBeNull();
  });
});
