import { appendFileSync, mkdtempSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DoctorReport } from "../../src/analyze/doctor/index.ts";
import { serveDashboard } from "../../src/cli/dashboard.ts";
import { readTimelineFrom, TimelineTail } from "../../src/dashboard/tail.ts";
import { isLoopback, startDashboard, type Dashboard } from "../../src/dashboard/server.ts";
import type { RunListItem } from "../../src/dashboard/data.ts";
import { RunStore } from "../../src/record/store.ts";
import type { RunWriter } from "../../src/record/writer.ts";
import type { TimelineEntry } from "../../src/record/types.ts";
import { GIB, TUNE_ID, writeSyntheticRun, writeSyntheticTune } from "../analyze/synthetic.ts";

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A request exactly as given: no URL normalisation, any Host header. */
function raw(port: number, path: string, headers: Record<string, string> = {}, method = "GET"): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method, headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

interface SseEvent {
  event: string;
  id: string | null;
  data: unknown;
}

/** Opens an event stream and collects its events; `next(pred)` waits for one. */
function openStream(
  port: number,
  path: string,
): { next(pred: (e: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>; events: SseEvent[]; ended: Promise<void>; close(): void } {
  const events: SseEvent[] = [];
  const waiters: { pred: (e: SseEvent) => boolean; resolve: (e: SseEvent) => void }[] = [];
  let endResolve: () => void = () => {};
  const ended = new Promise<void>((r) => (endResolve = r));
  let buffer = "";
  const req = request({ host: "127.0.0.1", port, path }, (res) => {
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      buffer += chunk;
      let cut: number;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const fields: Record<string, string> = {};
        for (const line of block.split("\n")) {
          const m = /^([a-z]+): ?(.*)$/.exec(line);
          if (m?.[1] !== undefined) fields[m[1]] = m[2] ?? "";
        }
        if (fields.event === undefined) continue;
        const e: SseEvent = { event: fields.event, id: fields.id ?? null, data: JSON.parse(fields.data ?? "null") };
        events.push(e);
        for (const w of [...waiters]) {
          if (w.pred(e)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(e);
          }
        }
      }
    });
    res.on("end", () => endResolve());
  });
  req.on("error", () => endResolve());
  req.end();
  return {
    events,
    ended,
    close: () => req.destroy(),
    next(pred, timeoutMs = 10000) {
      const seen = events.find(pred);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no matching event in ${timeoutMs} ms; got ${events.map((x) => x.event).join(", ")}`)), timeoutMs);
        waiters.push({ pred, resolve: (e) => (clearTimeout(timer), resolve(e)) });
      });
    },
  };
}

function sample(t: number, util: number, gpuBytes: number): TimelineEntry {
  return {
    t,
    kind: "sample",
    tree: { pids: 1, rss_bytes: 2 * GIB, cpu_percent: 100, gpu_bytes: gpuBytes },
    gpus: [{ index: 0, used_bytes: gpuBytes, total_bytes: 80 * GIB, util, mem_util: 30, sm_activity: null, power_w: 200, sm_clock_mhz: 1410, throttle: [] }],
    host: { mem_available_bytes: 100 * GIB, cpu_percent: 20 },
  };
}

describe("brim dashboard routes", () => {
  let store: RunStore;
  let dash: Dashboard;
  let doneId: string;
  let liveId: string;
  let live: RunWriter;
  let liveT: number;

  beforeAll(async () => {
    store = new RunStore(mkdtempSync(join(tmpdir(), "brim-dash-")));
    doneId = (await writeSyntheticRun(store, { wait: () => 0.3, compute: () => 0.2, workers: 0 }, new Date(Date.now() - 3600_000))).id;
    await writeSyntheticTune(store);
    const now = Date.now() / 1000;
    const started = await writeSyntheticRun(store, { running: true, steps: 4 }, new Date(Date.now() - 1000));
    liveId = started.id;
    live = started.writer;
    liveT = now;
    dash = await startDashboard({ store, port: 0, token: null, pollMs: 50, chartEveryMs: 50 });
  });

  afterAll(async () => {
    await dash?.close();
  });

  it("lists runs (live ones marked) and tunes", async () => {
    const page = await fetch(`${dash.url}`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toMatch(/default-src 'none'; script-src 'nonce-/);
    const html = await page.text();
    expect(html).toContain(`<a href="/runs/${doneId}">${doneId}</a>`);
    expect(html).toMatch(new RegExp(`<a href="/runs/${liveId}">${liveId}</a> <span class="live-badge">live</span>`));
    expect(html).toContain(`<a href="/tunes/${TUNE_ID}">${TUNE_ID}</a>`);
    const runs = (await (await fetch(`${dash.url}api/runs`)).json()) as RunListItem[];
    expect(runs[0]?.id).toBe(liveId);
    expect(runs.find((r) => r.id === liveId)).toMatchObject({ live: true, status: "running" });
    expect(runs.find((r) => r.id === doneId)).toMatchObject({ live: false, status: "ok", kind: "run" });
    expect(runs.filter((r) => r.kind === "trial")).toHaveLength(6);
  });

  it("shows a run: charts, numbers, findings, and where live updates resume", async () => {
    const donePage = await fetch(`${dash.url}runs/${doneId}`);
    const html = await donePage.text();
    expect(html).toMatch(/<main data-run="[^"]+" data-live="false" data-offset="\d+">/);
    expect((html.match(/<svg /g) ?? []).length).toBe(6); // the four run charts, loss and throughput by step
    expect(html).toContain('data-finding="data_starved"');
    // a finished run's page has only the charts' script (smoothing, hover), under the page's nonce, and no stream
    const doneNonce = /script-src 'nonce-([^']+)'/.exec(donePage.headers.get("content-security-policy") ?? "")?.[1];
    expect(html.match(/<script[^>]*>/g)).toEqual([`<script nonce="${doneNonce}">`]);
    expect(html).not.toContain("EventSource");
    const livePage = await fetch(`${dash.url}runs/${liveId}`);
    const liveHtml = await livePage.text();
    const nonce = /script-src 'nonce-([^']+)'/.exec(livePage.headers.get("content-security-policy") ?? "")?.[1];
    expect(liveHtml).toContain(`<script nonce="${nonce}">`);
    expect(liveHtml).toMatch(/data-live="true"/);
    const doctor = (await (await fetch(`${dash.url}api/runs/${doneId}/doctor`)).json()) as DoctorReport;
    expect(doctor.findings[0]?.id).toBe("data_starved");
    const detail = (await (await fetch(`${dash.url}api/runs/${doneId}`)).json()) as {
      meta: { id: string };
      status: string;
      measures: { samples_per_s: number };
    };
    expect(detail.meta.id).toBe(doneId);
    expect(detail.measures.samples_per_s).toBeGreaterThan(0);
  });

  it("shows a tune's curves and links its trials to their runs", async () => {
    const html = await (await fetch(`${dash.url}tunes/${TUNE_ID}`)).text();
    expect(html).toContain('data-chart="tune_throughput"');
    expect(html).toContain('data-chart="tune_memory"');
    expect(html).toMatch(/<tr class="winner" data-trial="4"><td class="num"><a href="\/runs\/\d{8}-\d{6}-[0-9a-f]{4}">4<\/a> ★/);
    const tune = (await (await fetch(`${dash.url}api/tunes/${TUNE_ID}`)).json()) as { id: string; trials: unknown[] };
    expect(tune.trials).toHaveLength(6);
  });

  it("refuses '..' and ids that are not record ids before touching the filesystem", async () => {
    for (const path of [
      "/runs/../../etc/passwd",
      "/api/runs/..%2F..%2Fetc%2Fpasswd",
      "/api/runs/%2e%2e/doctor",
      "/tunes/.%2E/x",
      "/runs/..\\..\\x",
      "/runs/20261122-101500-3f2a%2F..",
    ]) {
      const r = await raw(dash.port, path);
      expect(r.status, path).toBe(400);
    }
    for (const path of ["/api/runs/not-an-id", "/api/tunes/..;", "/runs/..hidden", "/runs/20261122-101500-3f2a%00"]) {
      const r = await raw(dash.port, path);
      expect(r.status, path).toBe(404);
    }
    const missing = await raw(dash.port, "/runs/20990101-000000-ffff");
    expect(missing.status).toBe(404);
    expect(missing.body).toMatch(/run 20990101-000000-ffff not found/);
    expect((await raw(dash.port, "/api/runs/20990101-000000-ffff")).body).toMatch(/"error": "run 20990101-000000-ffff not found/);
    expect((await raw(dash.port, "/nowhere")).status).toBe(404);
  });

  it("is read-only and answers to loopback host names only", async () => {
    const post = await raw(dash.port, "/api/runs", {}, "POST");
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe("GET, HEAD");
    expect((await raw(dash.port, "/", { Host: "evil.example:7878" })).status).toBe(403);
    expect((await raw(dash.port, "/", { Host: `localhost:${dash.port}` })).status).toBe(200);
    const head = await raw(dash.port, "/api/runs", {}, "HEAD");
    expect(head.status).toBe(200);
    expect(head.body).toBe("");
  });

  it("streams samples appended to a live run's timeline, then charts, then its end", async () => {
    const before = await readTimelineFrom(join(store.runDir(liveId), "timeline.ndjson"), 0);
    const stream = openStream(dash.port, `/api/runs/${liveId}/events?from=${before.offset}`);
    const appended = [sample(liveT + 1, 71, 11 * GIB), sample(liveT + 1.5, 88, 12 * GIB)];
    for (const e of appended) live.append(e);
    live.flush();
    const got = await stream.next((e) => e.event === "entries");
    expect(got.data).toEqual(appended);
    expect(Number(got.id)).toBeGreaterThan(before.offset);
    const charts = await stream.next((e) => e.event === "charts");
    const update = charts.data as { charts: Record<string, string>; numbers: { label: string }[]; tiles: { label: string; value: string }[] };
    expect(Object.keys(update.charts)).toEqual(["utilization", "memory", "throughput", "data_wait", "loss", "throughput_steps"]);
    expect(update.charts.utilization).toMatch(/data-y="[^"]* 71 88"/);
    expect(update.tiles.find((t) => t.label === "GPU utilization")?.value).toBe("88 %");
    live.append(sample(liveT + 2, 90, 12 * GIB));
    await live.finish({ cause: "ok", exit_code: 0, signal: null, message: "finished normally" }, null);
    const end = await stream.next((e) => e.event === "end");
    expect(end.data).toEqual({ cause: "ok", message: "finished normally" });
    await stream.ended;
    const entries = stream.events.filter((e) => e.event === "entries").flatMap((e) => e.data as TimelineEntry[]);
    expect(entries.map((e) => e.kind)).toEqual(["sample", "sample", "sample", "end"]);
  });

  it("ends the stream of a run whose end line landed before its run.json said so (no tick would see it)", async () => {
    const started = await writeSyntheticRun(store, { running: true, steps: 3 }, new Date(Date.now() - 1000));
    // the writer's order: the timeline's end line first, run.json after; the feed opens in between
    appendFileSync(join(store.runDir(started.id), "timeline.ndjson"), `${JSON.stringify({ t: Date.now() / 1000, kind: "end", cause: "ok" })}\n`);
    const stream = openStream(dash.port, `/api/runs/${started.id}/events?from=0`);
    const end = await stream.next((e) => e.event === "end", 8000);
    expect(end.data).toEqual({ cause: "ok", message: null });
    await stream.ended;
  });

  it("replays from an offset and ends at once for a finished run", async () => {
    const stream = openStream(dash.port, `/api/runs/${doneId}/events?from=0`);
    const end = await stream.next((e) => e.event === "end");
    expect(end.data).toMatchObject({ cause: "ok" });
    const entries = stream.events.filter((e) => e.event === "entries").flatMap((e) => e.data as TimelineEntry[]);
    const all = (await store.readRun(doneId)).timeline;
    expect(entries).toEqual(all);
    await stream.ended;
  });
});

describe("brim dashboard off localhost", () => {
  it("requires the printed token: query, cookie or bearer", async () => {
    const store = new RunStore(mkdtempSync(join(tmpdir(), "brim-dash-token-")));
    const dash = await startDashboard({ store, host: "0.0.0.0", port: 0 });
    try {
      expect(dash.token).toMatch(/^[A-Za-z0-9_-]{24}$/);
      expect(dash.url).toBe(`http://0.0.0.0:${dash.port}/?token=${dash.token}`);
      const none = await raw(dash.port, "/api/runs");
      expect(none.status).toBe(401);
      expect(none.body).toMatch(/needs its token/);
      expect((await raw(dash.port, "/api/runs?token=wrong")).status).toBe(401);
      expect((await raw(dash.port, "/runs/../x?token=wrong")).status).toBe(400);
      const ok = await raw(dash.port, `/?token=${dash.token}`);
      expect(ok.status).toBe(200);
      const cookie = String(ok.headers["set-cookie"]).split(";")[0] ?? "";
      expect(cookie).toBe(`brim_token=${dash.token}`);
      expect(String(ok.headers["set-cookie"])).toMatch(/HttpOnly; SameSite=Strict/);
      expect((await raw(dash.port, "/api/runs", { Cookie: cookie })).status).toBe(200);
      expect((await raw(dash.port, "/api/runs", { Authorization: `Bearer ${dash.token}` })).status).toBe(200);
      expect((await raw(dash.port, "/api/runs", { Host: "evil.example", Authorization: `Bearer ${dash.token}` })).status).toBe(200);
    } finally {
      await dash.close();
    }
  });

  it("refuses to serve another address without a token, and names a port in use", async () => {
    const store = new RunStore(mkdtempSync(join(tmpdir(), "brim-dash-x-")));
    await expect(startDashboard({ store, host: "0.0.0.0", port: 0, token: null })).rejects.toThrow(/needs a token/);
    const first = await startDashboard({ store, port: 0 });
    try {
      await expect(startDashboard({ store, port: first.port })).rejects.toThrow(new RegExp(`port ${first.port} is in use: pass --port 0`));
    } finally {
      await first.close();
    }
    expect(isLoopback("127.0.0.1") && isLoopback("localhost") && isLoopback("::1") && !isLoopback("0.0.0.0") && !isLoopback("192.168.1.2")).toBe(true);
  });

  it("prints the URL, serves until stopped, and stops cleanly", async () => {
    const store = mkdtempSync(join(tmpdir(), "brim-dash-cli-"));
    let stdout = "";
    const controller = new AbortController();
    const serving = serveDashboard({ store, port: 0 }, { stdout: (t) => void (stdout += t), stderr: (t) => void (stdout += t) }, controller.signal);
    for (let i = 0; i < 100 && !stdout.includes("Ctrl-C"); i++) await new Promise((r) => setTimeout(r, 20));
    const url = /brim dashboard: (http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{24})\n/.exec(stdout)?.[1];
    expect(url).toBeDefined();
    expect((await fetch(url as string)).status).toBe(200);
    expect((await fetch((url as string).replace(/\?.*/, ""))).status).toBe(401);
    controller.abort();
    await serving;
    expect(stdout).toMatch(/brim dashboard: stopped\n$/);
    await expect(fetch(url as string)).rejects.toThrow();
  });
});

describe("timeline tail", () => {
  it("returns whole lines only, each once", async () => {
    const { writeFileSync, appendFileSync } = await import("node:fs");
    const path = join(mkdtempSync(join(tmpdir(), "brim-tail-")), "timeline.ndjson");
    writeFileSync(path, '{"t":1,"kind":"start","pid":1}\n{"t":2,"ki');
    const tail = new TimelineTail(path);
    expect(await tail.poll()).toEqual([{ t: 1, kind: "start", pid: 1 }]);
    expect(await tail.poll()).toEqual([]);
    appendFileSync(path, 'nd":"sample"}\n{"t":3,"kind":"end"}\n');
    expect(await tail.poll()).toEqual([
      { t: 2, kind: "sample" },
      { t: 3, kind: "end" },
    ]);
    expect(tail.offset).toBe(Buffer.byteLength('{"t":1,"kind":"start","pid":1}\n{"t":2,"kind":"sample"}\n{"t":3,"kind":"end"}\n'));
    expect(await new TimelineTail(join(path, "..", "missing.ndjson")).poll()).toEqual([]);
  });
});

describe("brim dashboard on recorded stores", () => {
  it("shows a real tune and its trials, and a real run's findings, without writing anything", async () => {
    const { readdirSync, statSync } = await import("node:fs");
    const root = new URL("../fixtures/stores/cnn-lstm-tune/", import.meta.url).pathname;
    const snapshot = (): string[] =>
      readdirSync(root, { recursive: true })
        .map((f) => `${String(f)}:${statSync(join(root, String(f))).mtimeMs}`)
        .sort();
    const before = snapshot();
    const store = new RunStore(root);
    const dash = await startDashboard({ store, port: 0, token: null });
    try {
      const [tuneId] = await store.tuneIds();
      const html = await (await fetch(`${dash.url}tunes/${tuneId}`)).text();
      expect((html.match(/<tr class="[^"]*" data-trial="\d+">/g) ?? []).length).toBe(6);
      expect(html).toMatch(/data-series="fitted memory line \(fits ≤ \d+, beyond the chart\)"/);
      const runs = (await (await fetch(`${dash.url}api/runs`)).json()) as RunListItem[];
      expect(runs.every((r) => r.kind === "trial" && r.tune_id === tuneId && r.status === "ok")).toBe(true);
      const trial = await (await fetch(`${dash.url}runs/${runs[0]?.id}`)).text();
      expect(trial).toContain(`trial of <a href="/tunes/${tuneId}">`);
      expect(trial).toContain('data-finding="cpu_run"');
    } finally {
      await dash.close();
    }
    expect(snapshot()).toEqual(before);
  });
});
