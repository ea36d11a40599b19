import { createServer, type Server } from "node:http";
import { BrimError } from "../errors/index.ts";
import type { LiveState } from "./live.ts";

interface Metric {
  name: string;
  help: string;
  type: "gauge" | "counter";
  value: number | null;
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

/**
 * The live state in Prometheus' text exposition format (version 0.0.4). A value brim cannot measure
 * is left out rather than reported as 0.
 *
 * @example
 * ```ts
 * formatPrometheus(state, { run_id: "20261122-101500-3f2a" });
 * // # HELP brim_samples_per_second Training throughput over recent steady steps.
 * // # TYPE brim_samples_per_second gauge
 * // brim_samples_per_second{run_id="20261122-101500-3f2a"} 412.5
 * ```
 */
export function formatPrometheus(state: LiveState, labels: Record<string, string>): string {
  const labelText = Object.entries(labels)
    .map(([key, value]) => `${key}="${escapeLabel(value)}"`)
    .join(",");
  const suffix = labelText === "" ? "" : `{${labelText}}`;
  const metrics: Metric[] = [
    { name: "brim_steps_total", help: "Training steps reported by the job's main process.", type: "counter", value: state.steps },
    { name: "brim_samples_per_second", help: "Training throughput over recent steady steps.", type: "gauge", value: state.samplesPerS },
    { name: "brim_data_wait_ratio", help: "Share of recent step time spent waiting for data (0-1).", type: "gauge", value: state.waitShare },
    { name: "brim_memory_used_bytes", help: "Memory held by the job's process tree (GPU, or RAM in CPU mode).", type: "gauge", value: state.memUsedBytes },
    { name: "brim_memory_peak_bytes", help: "Most memory the job's process tree held at once.", type: "gauge", value: state.memPeakBytes },
    { name: "brim_memory_cap_bytes", help: "The memory cap brim enforces.", type: "gauge", value: state.capBytes },
    { name: "brim_gpu_utilization_percent", help: "NVML GPU utilization: share of time a kernel ran (not SM occupancy).", type: "gauge", value: state.gpuUtil },
    { name: "brim_sm_activity_percent", help: "GPM SM activity (Hopper and newer).", type: "gauge", value: state.smActivity },
    { name: "brim_gpu_power_watts", help: "GPU power draw.", type: "gauge", value: state.powerW },
    { name: "brim_cpu_percent", help: "CPU use of the job's process tree (100 = one core).", type: "gauge", value: state.cpuPercent },
    { name: "brim_oom_recoveries_total", help: "Out-of-memory errors recovered inside the step.", type: "counter", value: state.oomRecoveries },
    { name: "brim_shrink_requests_total", help: "Times brim asked the job to lower memory use.", type: "counter", value: state.shrinkRequests },
    { name: "brim_elapsed_seconds", help: "Seconds since the job started.", type: "gauge", value: state.elapsedS },
  ];
  const lines: string[] = [];
  for (const metric of metrics) {
    if (metric.value === null || !Number.isFinite(metric.value)) continue;
    lines.push(`# HELP ${metric.name} ${metric.help}`, `# TYPE ${metric.name} ${metric.type}`, `${metric.name}${suffix} ${metric.value}`);
  }
  return `${lines.join("\n")}\n`;
}

/**
 * Serves `/metrics` on 127.0.0.1 for Prometheus to scrape.
 *
 * @example
 * ```ts
 * const server = await serveMetrics(9400, () => formatPrometheus(live.snapshot(now()), { run_id }));
 * // curl http://127.0.0.1:9400/metrics
 * await new Promise((r) => server.close(r));
 * ```
 */
export async function serveMetrics(port: number, body: () => string, host = "127.0.0.1"): Promise<Server> {
  const server = createServer((request, response) => {
    if (request.method !== "GET" || (request.url !== "/metrics" && request.url !== "/")) {
      response.writeHead(404, { "content-type": "text/plain" }).end("not found: brim serves /metrics\n");
      return;
    }
    response.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }).end(body());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(new BrimError(error.code === "EADDRINUSE" ? "E_USAGE" : "E_IO", `--prometheus ${port}: ${error.code === "EADDRINUSE" ? "the port is in use" : error.message}`, { cause: error })),
    );
    server.listen(port, host, () => resolve());
  });
  server.unref();
  return server;
}
