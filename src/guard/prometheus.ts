import { createServer, type Server } from "node:http";
import { BrimError } from "../errors/index.ts";
import type { LiveState } from "./live.ts";

interface Metric {
  name: string;
  help: string;
  type: "gauge" | "counter";
  value: number | null;
  labels?: Record<string, string>;
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function labelSet(labels: Record<string, string>): string {
  const text = Object.entries(labels)
    .map(([key, value]) => `${key}="${escapeLabel(value)}"`)
    .join(",");
  return text === "" ? "" : `{${text}}`;
}

/** What the exposition says besides the live state. */
export interface PrometheusContext {
  /** The GPUs the gpu_* values cover (their NVML indices); empty or absent in CPU mode. */
  gpus?: readonly number[];
  /** false once the job has ended (the endpoint stays up for a grace period). */
  running?: boolean;
  /** Labels of `brim_build_info`. */
  build?: Record<string, string>;
}

/**
 * The live state in Prometheus' text exposition format (version 0.0.4), named per its conventions:
 * base units (`_bytes`, `_seconds`), shares as `_ratio` from 0 to 1, counters as `_total`,
 * `brim_build_info` set to 1 with the versions as labels, GPU readings labelled `gpu` (the index, or
 * the indices a mean covers, e.g. `0,1`), memory labelled `scope` (`gpu` or `ram`). A value brim
 * cannot measure is left out rather than reported as 0.
 *
 * @example
 * ```ts
 * formatPrometheus(state, { run_id: "20261122-101500-3f2a" }, { gpus: [0], running: true, build: { version: "0.1.0" } });
 * // # HELP brim_samples_per_second Training throughput over recent steady steps.
 * // # TYPE brim_samples_per_second gauge
 * // brim_samples_per_second{run_id="20261122-101500-3f2a"} 412.5
 * // ...
 * // brim_gpu_utilization_ratio{run_id="20261122-101500-3f2a",gpu="0"} 0.97
 * ```
 */
export function formatPrometheus(state: LiveState, labels: Record<string, string>, context: PrometheusContext = {}): string {
  const gpu = context.gpus !== undefined && context.gpus.length > 0 ? { gpu: context.gpus.join(",") } : null;
  const scope = { scope: state.capScope };
  const ratio = (percent: number | null): number | null => (percent === null ? null : percent / 100);
  const metrics: Metric[] = [
    {
      name: "brim_build_info",
      help: "brim's version and the runtime it runs on (always 1).",
      type: "gauge",
      value: context.build !== undefined ? 1 : null,
      labels: context.build,
    },
    {
      name: "brim_job_running",
      help: "1 while the job runs, 0 after it ended (the endpoint stays up for a grace period).",
      type: "gauge",
      value: context.running === undefined ? null : context.running ? 1 : 0,
    },
    { name: "brim_steps_total", help: "Training steps reported by the job's main process.", type: "counter", value: state.steps },
    { name: "brim_samples_per_second", help: "Training throughput over recent steady steps.", type: "gauge", value: state.samplesPerS },
    { name: "brim_data_wait_ratio", help: "Share of recent step time spent waiting for data (0-1).", type: "gauge", value: state.waitShare },
    { name: "brim_eta_seconds", help: "Estimated time until the step budget is reached.", type: "gauge", value: state.etaS },
    { name: "brim_loss", help: "The loss of the last step the job reported.", type: "gauge", value: state.loss },
    { name: "brim_micro_batch", help: "Micro-batch in force (samples per forward pass).", type: "gauge", value: state.microBatch },
    {
      name: "brim_memory_used_bytes",
      help: "Memory held by the job's process tree (scope gpu: GPU memory; ram: RSS in CPU mode).",
      type: "gauge",
      value: state.memUsedBytes,
      labels: scope,
    },
    { name: "brim_memory_peak_bytes", help: "Most memory the job's process tree held at once.", type: "gauge", value: state.memPeakBytes, labels: scope },
    { name: "brim_memory_cap_bytes", help: "The memory cap brim enforces.", type: "gauge", value: state.capBytes, labels: scope },
    {
      name: "brim_gpu_utilization_ratio",
      help: "NVML GPU utilization (0-1): share of time a kernel ran, not SM occupancy; the mean over the GPUs in the gpu label.",
      type: "gauge",
      value: gpu ? ratio(state.gpuUtil) : null,
      labels: gpu ?? {},
    },
    {
      name: "brim_gpu_sm_activity_ratio",
      help: "GPM SM activity (0-1, Hopper and newer); the mean over the GPUs in the gpu label.",
      type: "gauge",
      value: gpu ? ratio(state.smActivity) : null,
      labels: gpu ?? {},
    },
    {
      name: "brim_gpu_power_watts",
      help: "GPU power draw, summed over the GPUs in the gpu label.",
      type: "gauge",
      value: gpu ? state.powerW : null,
      labels: gpu ?? {},
    },
    {
      name: "brim_cpu_cores",
      help: "CPU cores the job's process tree keeps busy (1 = one core fully).",
      type: "gauge",
      value: state.cpuPercent === null ? null : state.cpuPercent / 100,
    },
    { name: "brim_processes", help: "Processes in the job's process tree.", type: "gauge", value: state.processes },
    { name: "brim_oom_recoveries_total", help: "Out-of-memory errors recovered inside the step.", type: "counter", value: state.oomRecoveries },
    { name: "brim_shrink_requests_total", help: "Times brim asked the job to lower memory use.", type: "counter", value: state.shrinkRequests },
    { name: "brim_elapsed_seconds", help: "Seconds since the job started.", type: "gauge", value: state.elapsedS },
  ];
  const lines: string[] = [];
  for (const metric of metrics) {
    if (metric.value === null || !Number.isFinite(metric.value)) continue;
    lines.push(
      `# HELP ${metric.name} ${metric.help}`,
      `# TYPE ${metric.name} ${metric.type}`,
      `${metric.name}${labelSet({ ...labels, ...metric.labels })} ${metric.value}`,
    );
  }
  return `${lines.join("\n")}\n`;
}

function isLoopbackHost(name: string | null): boolean {
  return name !== null && (name === "localhost" || name === "::1" || name === "[::1]" || /^127(\.\d{1,3}){3}$/.test(name));
}

function hostOf(header: string | undefined): string | null {
  if (header === undefined) return null;
  return /^(\[[^\]]+\]|[^:]+)(?::\d+)?$/.exec(header.trim().toLowerCase())?.[1] ?? null;
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
  if (!Number.isSafeInteger(port) || port < 1 || port > 65535) throw new BrimError("E_USAGE", `--prometheus ${port}: a port is a whole number from 1 to 65535`);
  const loopback = isLoopbackHost(host);
  const server = createServer((request, response) => {
    // A web page the user opens cannot read the metrics through DNS rebinding: loopback names only.
    if (loopback && !isLoopbackHost(hostOf(request.headers.host))) {
      response.writeHead(403, { "content-type": "text/plain" }).end(`brim's metrics answer to 127.0.0.1:${port} and localhost:${port} only\n`);
      return;
    }
    if (request.method !== "GET" || (request.url !== "/metrics" && request.url !== "/")) {
      response.writeHead(404, { "content-type": "text/plain" }).end("not found: brim serves /metrics\n");
      return;
    }
    response.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }).end(body());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        new BrimError(
          error.code === "EADDRINUSE" ? "E_USAGE" : "E_IO",
          `--prometheus ${port}: ${error.code === "EADDRINUSE" ? "the port is in use" : error.message}`,
          { cause: error },
        ),
      ),
    );
    server.listen(port, host, () => resolve());
  });
  server.unref();
  return server;
}
