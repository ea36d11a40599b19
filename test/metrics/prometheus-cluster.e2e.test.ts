// Metrics a cluster's Prometheus can use: one series per GPU with dcgm-exporter's labels (gpu, UUID,
// modelName, Hostname), the job's start time, and an endpoint beyond loopback only with a bearer token —
// the last through the built CLI.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { hostname, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LiveTracker } from "../../src/guard/live.ts";
import { formatPrometheus, parseListen, serveMetrics } from "../../src/metrics/prometheus.ts";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-prom-cluster-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const TOKEN = "s3cret-token-for-the-scrape";

async function freePort(): Promise<number> {
  return new Promise((done) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => done(port));
    });
  });
}

describe("Prometheus for clusters", () => {
  it("one series per GPU with gpu, UUID, modelName and Hostname, and the start time", () => {
    const live = new LiveTracker({ startedAt: 1_763_800_000.5, capBytes: null, capScope: "gpu", totalSteps: null });
    live.reading({
      t: 1_763_800_010,
      usedBytes: 2 ** 33,
      gpuUtil: 60,
      smActivity: null,
      powerW: 500,
      cpuPercent: 100,
      processes: 3,
      perGpu: [
        { index: 0, util: 90, smActivity: null, powerW: 300, usedBytes: 2 ** 33 },
        { index: 1, util: 30, smActivity: null, powerW: 200, usedBytes: 2 ** 32 },
      ],
    });
    const gpuInfo = [
      { index: 0, name: "NVIDIA H100 80GB HBM3", uuid: "GPU-aaaa" },
      { index: 1, name: "NVIDIA H100 80GB HBM3", uuid: "GPU-bbbb" },
    ];
    const text = formatPrometheus(live.snapshot(1_763_800_010), { run_id: "r1" }, { gpus: [0, 1], gpuInfo, hostname: "node7" });
    const lines = text.split("\n").filter((l) => l !== "" && !l.startsWith("#"));
    expect(lines.every((l) => l.includes('Hostname="node7"'))).toBe(true);
    const label = 'Hostname="node7",gpu="0",UUID="GPU-aaaa",modelName="NVIDIA H100 80GB HBM3"';
    expect(lines).toContain(`brim_gpu_utilization_ratio{run_id="r1",${label}} 0.9`);
    expect(lines).toContain(`brim_gpu_utilization_ratio{run_id="r1",${label.replace('gpu="0"', 'gpu="1"').replace("aaaa", "bbbb")}} 0.3`);
    expect(lines).toContain(`brim_gpu_power_watts{run_id="r1",${label}} 300`);
    expect(lines).toContain(`brim_gpu_memory_used_bytes{run_id="r1",${label}} ${2 ** 33}`);
    expect(lines.some((l) => l.includes('gpu="0,1"'))).toBe(false); // no averaged series any more
    expect(lines).toContain('brim_start_time_seconds{run_id="r1",Hostname="node7"} 1763800000.5');
  });

  it("parses [host:]port", () => {
    expect(parseListen("9400")).toEqual({ host: "127.0.0.1", port: 9400 });
    expect(parseListen("0.0.0.0:9400")).toEqual({ host: "0.0.0.0", port: 9400 });
    expect(parseListen("[::]:9400")).toEqual({ host: "::", port: 9400 });
    expect(() => parseListen("0.0.0.0:70000")).toThrow(/port from 1 to 65535/);
    expect(() => parseListen("nine")).toThrow(/\[host:\]port/);
  });

  it("refuses a non-loopback address without a token, and asks every scrape for it", async () => {
    await expect(serveMetrics(await freePort(), () => "x 1\n", "0.0.0.0", null)).rejects.toThrow(/--prometheus-token/);
    const port = await freePort();
    const server = await serveMetrics(port, () => "x 1\n", "0.0.0.0", TOKEN);
    try {
      expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(401);
      expect((await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: "Bearer nope" } })).status).toBe(401);
      const ok = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toBe("x 1\n");
    } finally {
      server.close();
    }
  });

  it(
    "brim run --prometheus 0.0.0.0:<port> --prometheus-token: a scrape with the token reads the running job",
    async () => {
      const port = await freePort();
      const script = "import time, brim\nfor _ in brim.track(range(400), samples=4):\n    time.sleep(0.01)";
      const args = [
        "run",
        "--store",
        join(root, "store"),
        "--quiet",
        "--prometheus",
        `0.0.0.0:${port}`,
        "--prometheus-token",
        TOKEN,
        "--prometheus-grace",
        "0",
      ];
      const child = spawn(process.execPath, [join(REPO, "bin", "brim.js"), ...args, "--", PYTHON, "-c", script], { cwd: root });
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
      let body = "";
      const deadline = Date.now() + scaled(30_000);
      while (!/brim_steps_total\{[^}]*\} [1-9]/.test(body) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        body = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
          .then((r) => r.text())
          .catch(() => "");
      }
      expect(body, stderr).toMatch(new RegExp(`brim_start_time_seconds\\{run_id="[^"]+",Hostname="${hostname()}"\\} \\d+`));
      expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(401);
      expect(await exited).toBe(0);
    },
    scaled(60_000),
  );
});
