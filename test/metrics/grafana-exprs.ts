/** The PromQL of docs/grafana/brim.json: every panel target's and every query variable's. */
import { readFileSync } from "node:fs";

interface Dashboard {
  panels: { title: string; targets?: { expr?: string }[] }[];
  templating: { list: { name: string; type: string; definition?: string }[] };
}

export const DASHBOARD_PATH = new URL("../../docs/grafana/brim.json", import.meta.url);

export function readDashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD_PATH, "utf8")) as Dashboard;
}

/** Each expression with where it sits (a panel's title, or the variable's name). */
export function dashboardExprs(dashboard = readDashboard()): { where: string; expr: string }[] {
  return [
    ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: `panel '${p.title}'`, expr: t.expr ?? "" }))),
    ...dashboard.templating.list
      .filter((v) => v.type === "query")
      .map((v) => ({ where: `variable $${v.name}`, expr: (v.definition ?? "").replace(/^label_values\((.*), *\w+\)$/, "$1") })),
  ];
}

/** An expression as Prometheus itself takes it: Grafana's variables given values. */
export function withVariables(expr: string, job: string): string {
  return expr.replaceAll("$job", job).replaceAll("$node", ".*").replaceAll("$__rate_interval", "1m").replaceAll("$__range", "1h");
}
