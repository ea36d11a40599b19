// docs/grafana/brim.json asks only for metrics brim exports, by the labels brim sets, and every
// variable it uses is defined (its PromQL runs against a real Prometheus in prometheus-real.e2e.test.ts).
import { describe, expect, it } from "vitest";
import type { LiveState } from "../../src/guard/live.ts";
import { clusterLabels, formatPrometheus } from "../../src/metrics/index.ts";
import { dashboardExprs, readDashboard } from "./grafana-exprs.ts";

// every value known, so that the exposition names every metric brim has
const full: LiveState = {
  elapsedS: 30,
  steps: 120,
  totalSteps: 500,
  samplesPerS: 400,
  waitShare: 0.1,
  etaS: 60,
  memUsedBytes: 2 ** 33,
  memPeakBytes: 2 ** 33,
  capBytes: 2 ** 34,
  capScope: "gpu",
  gpuUtil: 90,
  smActivity: 50,
  powerW: 300,
  cpuPercent: 120,
  processes: 4,
  microBatch: 64,
  accumulation: 1,
  loss: 0.5,
  oomRecoveries: 0,
  shrinkRequests: 0,
  lastEvent: null,
  startTimeS: 1_763_800_000,
  perGpu: [{ index: 0, util: 90, smActivity: 50, powerW: 300, usedBytes: 2 ** 33 }],
};
const exposition = formatPrometheus(
  full,
  { run_id: "r", ...clusterLabels({ GROUP_RANK: "0", RANK: "0", LOCAL_RANK: "0" }, "j") },
  {
    gpus: [0],
    running: true,
    build: { version: "0.1.0" },
    gpuInfo: [{ index: 0, name: "NVIDIA H100", uuid: "GPU-1" }],
    hostname: "n1",
  },
);
const exported = new Set([...exposition.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1] as string));
const labels = new Set([...exposition.matchAll(/[{,]([A-Za-z_]+)="/g)].map((m) => m[1] as string));

describe("the Grafana dashboard", () => {
  const dashboard = readDashboard();
  const exprs = dashboardExprs(dashboard);

  it("has panels, each with a query", () => {
    expect(dashboard.panels.length).toBeGreaterThan(10);
    for (const panel of dashboard.panels) expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
  });

  it("names only metrics brim exports", () => {
    expect(exported.size).toBeGreaterThan(15);
    for (const { where, expr } of exprs) {
      const names = [...expr.matchAll(/\bbrim_[a-z_]+\b/g)].map((m) => m[0]);
      expect(names.length, `${where}: ${expr}`).toBeGreaterThan(0);
      for (const name of names) expect(exported, `${where}: ${name} is not a metric brim exports`).toContain(name);
    }
  });

  it("selects and groups by labels brim sets", () => {
    for (const { where, expr } of exprs) {
      const used = [
        ...[...expr.matchAll(/([A-Za-z_]+)\s*=~?\s*"/g)].map((m) => m[1] as string),
        ...[...expr.matchAll(/by \(([^)]*)\)/g)].flatMap((m) => (m[1] as string).split(",").map((l) => l.trim())),
      ];
      for (const label of used) expect(labels, `${where}: label ${label}`).toContain(label);
    }
  });

  it("defines every variable its queries use", () => {
    const defined = new Set(["__rate_interval", "__range", ...dashboard.templating.list.map((v) => v.name)]);
    for (const { where, expr } of exprs) for (const m of expr.matchAll(/\$(\w+)/g)) expect(defined, `${where}: $${m[1]}`).toContain(m[1]);
  });
});
