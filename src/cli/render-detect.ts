import { formatBytes } from "../bytes.ts";
import { table } from "../format.ts";
import type { DetectReport } from "../devices/index.ts";

function orDash(value: number | null, unit: string, digits = 0): string {
  return value === null ? "–" : `${value.toFixed(digits)}${unit}`;
}

function hostLine(host: DetectReport["host"]): string {
  const cpus = host.usable_cpus < host.cpus ? `${host.cpus} CPUs (${host.usable_cpus} usable)` : `${host.cpus} CPUs`;
  const model = host.cpu_model === null ? "" : ` (${host.cpu_model})`;
  const busy = host.cpu_percent === null ? "" : `, CPU ${host.cpu_percent.toFixed(0)}% busy`;
  return `host     ${cpus}${model}, RAM ${formatBytes(host.mem_total_bytes)}, ${formatBytes(host.mem_available_bytes)} available${busy}`;
}

/**
 * Renders a detect report for the terminal. In CPU mode: the note line and the host.
 *
 * @example
 * ```ts
 * process.stdout.write(renderDetectText(await detectCommand()));
 * ```
 */
export function renderDetectText(report: DetectReport): string {
  const lines: string[] = [];
  if (report.backend === "cpu") {
    if (report.note !== null) lines.push(report.note);
    lines.push(hostLine(report.host));
    return lines.join("\n") + "\n";
  }
  const versions = [report.driver === null ? null : `driver ${report.driver}`, report.cuda === null ? null : `CUDA ${report.cuda}`].filter((v) => v !== null);
  lines.push(`backend  ${[report.backend, ...versions].join(" · ")}`);
  if (report.note !== null) lines.push(report.note);
  lines.push("");
  const rows = [["GPU", "name", "memory used / total", "util", "SM activity", "power / limit", "SM clock", "throttle"]];
  for (const g of report.gpus) {
    rows.push([
      String(g.index),
      `${g.name}${g.compute_capability === null ? "" : ` (sm ${g.compute_capability})`}${g.lost ? " LOST" : ""}`,
      `${formatBytes(g.used_bytes)} / ${formatBytes(g.total_bytes)}`,
      orDash(g.util, "%"),
      orDash(g.sm_activity, "%", 1),
      g.power_w === null ? "–" : `${g.power_w.toFixed(0)} W / ${orDash(g.power_limit_w, " W")}`,
      orDash(g.sm_clock_mhz, " MHz"),
      g.throttle === null ? "–" : g.throttle.length === 0 ? "none" : g.throttle.join(","),
    ]);
  }
  lines.push(...table(rows));
  for (const g of report.gpus) {
    const processes = g.processes.length === 0 ? "no processes" : `${g.processes.length} process${g.processes.length === 1 ? "" : "es"}`;
    lines.push(`GPU ${g.index}: ${processes}; readings: ${g.available.length === 0 ? "memory only" : g.available.join(", ")}`);
  }
  lines.push("", hostLine(report.host));
  return lines.join("\n") + "\n";
}
