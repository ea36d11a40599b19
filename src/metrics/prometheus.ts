import { timingSafeEqual } from "node:crypto";
import { createServer, type Server } from "node:http";
import { BrimError } from "../errors/index.ts";
import type { LiveState } from "../guard/live.ts";

interface Metric {
  name: string;
  help: string;
  type: "gauge" | "counter";
  value: number | null;
  labels?: Record<string, string>;
  /** several series of one metric (one per GPU); replaces value/labels */
  samples?: { value: number | null; labels: Record<string, string> }[];
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
  /** The job's GPUs as the inventory names them: per-GPU series carry dcgm-exporter's labels. */
  gpuInfo?: readonly { index: number; name: string; uuid: string | null }[];
  /** This machine's name: the `Hostname` label of every series (dcgm-exporter's name). */
  hostname?: string;
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
  const host: Record<string, string> = context.hostname !== undefined ? { Hostname: context.hostname } : {};
  const perGpu = gpu !== null && state.perGpu !== undefined && state.perGpu.length > 0 ? state.perGpu : null;
  // one series per GPU, labelled as dcgm-exporter labels its own (gpu, UUID, modelName, Hostname)
  const gpuLabels = (index: number): Record<string, string> => {
    const info = context.gpuInfo?.find((g) => g.index === index);
    return { gpu: String(index), ...(info?.uuid ? { UUID: info.uuid } : {}), ...(info ? { modelName: info.name } : {}) };
  };
  const each = (read: (g: NonNullable<typeof perGpu>[number]) => number | null): Metric["samples"] =>
    perGpu?.map((g) => ({ value: read(g), labels: gpuLabels(g.index) }));
  const metrics: Metric[] = [
    {
      name: "brim_start_time_seconds",
      help: "Start time of the job since the Unix epoch in seconds.",
      type: "gauge",
      value: state.startTimeS ?? null,
    },
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
      samples: each((g) => ratio(g.util)),
    },
    {
      name: "brim_gpu_sm_activity_ratio",
      help: "GPM SM activity (0-1, Hopper and newer); the mean over the GPUs in the gpu label.",
      type: "gauge",
      value: gpu ? ratio(state.smActivity) : null,
      labels: gpu ?? {},
      samples: each((g) => ratio(g.smActivity)),
    },
    {
      name: "brim_gpu_power_watts",
      help: "GPU power draw, summed over the GPUs in the gpu label.",
      type: "gauge",
      value: gpu ? state.powerW : null,
      labels: gpu ?? {},
      samples: each((g) => g.powerW),
    },
    {
      name: "brim_gpu_memory_used_bytes",
      help: "GPU memory in use on the GPU, by every process (NVML), per GPU.",
      type: "gauge",
      value: null,
      samples: each((g) => g.usedBytes),
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
    const samples = (metric.samples ?? [{ value: metric.value, labels: metric.labels ?? {} }]).filter(
      (x): x is { value: number; labels: Record<string, string> } => x.value !== null && Number.isFinite(x.value),
    );
    if (samples.length === 0) continue;
    lines.push(`# HELP ${metric.name} ${metric.help}`, `# TYPE ${metric.name} ${metric.type}`);
    for (const x of samples) lines.push(`${metric.name}${labelSet({ ...labels, ...host, ...x.labels })} ${x.value}`);
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
 * Where `--prometheus` listens: `9400` (127.0.0.1), `0.0.0.0:9400`, `[::]:9400`, `node7:9400`.
 *
 * @example
 * ```ts
 * parseListen("0.0.0.0:9400"); // { host: "0.0.0.0", port: 9400 }
 * ```
 */
export function parseListen(text: string): { host: string; port: number } {
  const m = /^(?:(\[[0-9a-fA-F:.]+\]|[^:[\]\s]+):)?(\d+)$/.exec(text.trim());
  const port = Number(m?.[2]);
  if (m === null || port < 1 || port > 65535)
    throw new BrimError("E_USAGE", `--prometheus ${text}: give [host:]port, e.g. 9400 (127.0.0.1 only) or 0.0.0.0:9400, a port from 1 to 65535`);
  return { host: (m[1] ?? "127.0.0.1").replace(/^\[(.*)\]$/, "$1"), port };
}

/**
 * Whether `host` listens on this machine only.
 *
 * @example
 * ```ts
 * isLoopbackListen("0.0.0.0"); // false
 * ```
 */
export function isLoopbackListen(host: string): boolean {
  return isLoopbackHost(host.toLowerCase());
}

/**
 * Serves `/metrics` for Prometheus to scrape: on 127.0.0.1 by default (loopback names only, against
 * DNS rebinding); on any other address only with a token, which every scrape must send as
 * `Authorization: Bearer <token>` (Prometheus: `authorization: { credentials: <token> }`).
 *
 * @example
 * ```ts
 * const server = await serveMetrics(9400, () => formatPrometheus(live.snapshot(now()), { run_id }));
 * // curl http://127.0.0.1:9400/metrics
 * await new Promise((r) => server.close(r));
 * ```
 */
export async function serveMetrics(port: number, body: () => string, host = "127.0.0.1", token: string | null = null): Promise<Server> {
  if (!Number.isSafeInteger(port) || port < 1 || port > 65535) throw new BrimError("E_USAGE", `--prometheus ${port}: a port is a whole number from 1 to 65535`);
  const loopback = isLoopbackListen(host);
  if (!loopback && (token === null || token.length < 16))
    throw new BrimError(
      "E_USAGE",
      token === null
        ? `--prometheus ${host}:${port} is reachable from other machines: give --prometheus-token <token> (16 characters or more; or BRIM_PROMETHEUS_TOKEN) and send it as the scrape's bearer token`
        : `--prometheus-token is ${token.length} character${token.length === 1 ? "" : "s"} long: a token for ${host}:${port}, reachable from other machines, needs 16 or more (a short one can be guessed)`,
    );
  const expected = token === null ? null : Buffer.from(`Bearer ${token}`);
  const server = createServer((request, response) => {
    if (expected !== null) {
      const given = Buffer.from(request.headers.authorization ?? "");
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        response
          .writeHead(401, { "content-type": "text/plain", "www-authenticate": "Bearer" })
          .end("brim's metrics need the bearer token of --prometheus-token\n");
        return;
      }
    }
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
