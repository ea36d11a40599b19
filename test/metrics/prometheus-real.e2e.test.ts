// A real Prometheus (Debian's package, the binary .ci/setup takes out of it) scrapes two `brim run
// --prometheus` on different ports — two "nodes" of one job, told apart by GROUP_RANK as torchrun gives
// it — and a PromQL sum over the job equals the sum of the samples/s each brim serves. Without the
// binary the test says why it skips; in CI (BRIM_REQUIRE_FRAMEWORKS=1) a missing binary fails. Every
// query of the Grafana dashboard runs on it, and its first panel shows that sum.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { dashboardExprs, withVariables } from "./grafana-exprs.ts";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const JOB = "brim-ci-cluster";

/** BRIM_PROMETHEUS, else the binary .ci/setup extracted to .tools/, else `prometheus` on the PATH. */
function findPrometheus(): string | null {
  const candidates = [
    process.env.BRIM_PROMETHEUS,
    join(REPO, ".tools", "prometheus"),
    ...(process.env.PATH ?? "").split(delimiter).map((dir) => join(dir, "prometheus")),
  ];
  for (const path of candidates) {
    if (path === undefined || path === "" || !existsSync(path)) continue;
    if (spawnSync(path, ["--version"], { encoding: "utf8" }).status === 0) return path;
  }
  return null;
}

const PROMETHEUS = findPrometheus();
const root = mkdtempSync(join(tmpdir(), "brim-prom-real-"));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  return new Promise((done) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => done(port));
    });
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The job: 40 steps of 4 samples, then it idles (its samples/s holds still) until the test drops its stop file. */
function job(stopFile: string): string {
  return [
    "import os, time, brim",
    "for _ in brim.track(range(40), samples=4):",
    "    time.sleep(0.01)",
    `while not os.path.exists(${JSON.stringify(stopFile)}):`,
    "    time.sleep(0.05)",
  ].join("\n");
}

/** brim's own value of a metric for a label, from its /metrics, or null. */
async function served(port: number, metric: string): Promise<number | null> {
  const body = await fetch(`http://127.0.0.1:${port}/metrics`)
    .then((r) => r.text())
    .catch(() => "");
  const line = body.split("\n").find((l) => l.startsWith(`${metric}{`));
  return line === undefined ? null : Number(line.slice(line.lastIndexOf(" ") + 1));
}

interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

async function ask(port: number, promql: string, time: number): Promise<{ status: string; error?: string; data?: { result: PromSample[] } }> {
  const url = `http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(promql)}&time=${time}`;
  return (await fetch(url)
    .then((r) => r.json())
    .catch(() => ({ status: "down" }))) as { status: string; error?: string; data?: { result: PromSample[] } };
}

async function query(port: number, promql: string, time: number): Promise<PromSample[]> {
  const answer = await ask(port, promql, time);
  return answer.status === "success" ? (answer.data?.result ?? []) : [];
}

describe("a real Prometheus scrapes brim", () => {
  it.skipIf(PROMETHEUS === null)(
    "sums a job's samples/s over two brims (nodes 0 and 1) to the sum of what each serves",
    async () => {
      const ports = [await freePort(), await freePort()];
      const stops = ports.map((_, node) => join(root, `stop-${node}`));
      const exits = ports.map((port, node) => {
        const args = ["run", "--store", join(root, `store-${node}`), "--quiet", "--name", JOB, "--prometheus", String(port), "--prometheus-grace", "0"];
        const child = spawn(process.execPath, [join(REPO, "bin", "brim.js"), ...args, "--", PYTHON, "-c", job(stops[node] as string)], {
          cwd: root,
          env: { ...process.env, GROUP_RANK: String(node), RANK: String(node * 2), LOCAL_RANK: "0" },
          stdio: ["ignore", "ignore", "pipe"],
        });
        children.push(child);
        let stderr = "";
        child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
        return new Promise<{ code: number | null; stderr: string }>((r) => child.on("exit", (code) => r({ code, stderr })));
      });

      const promPort = await freePort();
      const config = join(root, "prometheus.yml");
      // honor_labels: brim's own job/node/rank labels stay as brim sets them (not exported_job)
      writeFileSync(
        config,
        [
          "global: { scrape_interval: 1s, evaluation_interval: 1s }",
          "scrape_configs:",
          "  - job_name: brim",
          "    honor_labels: true",
          `    static_configs: [{ targets: [${ports.map((p) => `"127.0.0.1:${p}"`).join(", ")}] }]`,
          "",
        ].join("\n"),
      );
      const prometheus = spawn(
        PROMETHEUS as string,
        [`--config.file=${config}`, `--storage.tsdb.path=${join(root, "tsdb")}`, `--web.listen-address=127.0.0.1:${promPort}`],
        { stdio: ["ignore", "ignore", "pipe"] },
      );
      children.push(prometheus);
      let promLog = "";
      prometheus.stderr?.on("data", (d: Buffer) => (promLog = (promLog + d.toString()).slice(-4000)));

      // each brim's samples/s, once the job idles after its steps (then it holds still)
      const own: number[] = [];
      for (const [node, port] of ports.entries()) {
        const deadline = Date.now() + scaled(40_000);
        let last: number | null = null;
        for (;;) {
          const steps = await served(port, "brim_steps_total");
          const rate = await served(port, "brim_samples_per_second");
          if (steps !== null && steps >= 40 && rate !== null && rate === last) break;
          last = rate;
          expect(Date.now() < deadline, `brim of node ${node} never served 40 steps and a steady samples/s`).toBe(true);
          await sleep(500);
        }
        own.push(last);
      }

      // Prometheus holds both series, with the labels brim gave them
      const selector = `brim_samples_per_second{job="${JOB}"}`;
      let series: PromSample[] = [];
      let at = 0;
      const deadline = Date.now() + scaled(30_000);
      while (Date.now() < deadline) {
        at = Date.now() / 1000;
        series = await query(promPort, selector, at);
        if (series.length === 2 && series.every((s) => Number(s.value[1]) === own[Number(s.metric.node)])) break;
        await sleep(500);
      }
      expect(series.length, `Prometheus has no two series of ${selector}:\n${promLog}`).toBe(2);
      const byNode: Record<string, PromSample> = Object.fromEntries(series.map((s) => [s.metric.node ?? "", s]));
      expect(Number(byNode["0"]?.value[1])).toBe(own[0]);
      expect(Number(byNode["1"]?.value[1])).toBe(own[1]);
      expect(byNode["0"]?.metric).toMatchObject({ job: JOB, node: "0", rank: "0", local_rank: "0" });
      expect(byNode["1"]?.metric).toMatchObject({ job: JOB, node: "1", rank: "2", local_rank: "0" });
      expect(byNode["0"]?.metric.run_id).toMatch(/^\d{8}-\d{6}-[0-9a-f]{4}$/);

      // the PromQL sum over the job is the sum of what the two brims serve
      const [sum] = await query(promPort, `sum by (job) (${selector})`, at);
      expect(sum?.metric).toEqual({ job: JOB });
      expect(Number(sum?.value[1])).toBeCloseTo((own[0] as number) + (own[1] as number), 9);

      // every query of the Grafana dashboard (docs/grafana/brim.json) is PromQL this Prometheus runs
      for (const { where, expr } of dashboardExprs()) {
        const answer = await ask(promPort, withVariables(expr, JOB), at);
        expect(answer.status, `${where}: ${expr}: ${answer.error ?? ""}`).toBe("success");
      }
      const [total] = await query(promPort, withVariables(dashboardExprs()[0]?.expr ?? "", JOB), at);
      expect(Number(total?.value[1])).toBeCloseTo((own[0] as number) + (own[1] as number), 9);

      for (const stop of stops) writeFileSync(stop, "");
      for (const exit of exits) {
        const { code, stderr } = await exit;
        expect(code, stderr).toBe(0);
      }
      prometheus.kill("SIGTERM");
    },
    scaled(120_000),
  );

  it("has a Prometheus to test with in CI (BRIM_REQUIRE_FRAMEWORKS=1), else the test above says why it skips", () => {
    const reason = "no Prometheus binary: BRIM_PROMETHEUS, .tools/prometheus (bash .ci/setup takes it out of Debian's package) or prometheus on the PATH";
    if (PROMETHEUS === null) {
      console.warn(`skipped the real Prometheus test: ${reason}`);
      expect(process.env.BRIM_REQUIRE_FRAMEWORKS, reason).not.toBe("1");
    }
  });
});
