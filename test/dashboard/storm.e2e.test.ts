// The dashboard under a connection storm, through its real parts: `brim dashboard` as its own process,
// real HTTP on loopback, a run whose timeline grows while clients come and go.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { get, type IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDashboard } from "../../src/dashboard/server.ts";
import { RunStore } from "../../src/record/store.ts";
import type { RunWriter } from "../../src/record/writer.ts";
import type { TimelineEntry } from "../../src/record/types.ts";
import { noteOutcome } from "../helpers/outcomes.ts";
import { REPO, sleep, until } from "../reliability/faults.ts";
import { scaled } from "../helpers/time.ts";

const root = mkdtempSync(join(tmpdir(), "brim-storm-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function liveRun(store: RunStore, steps: number): Promise<RunWriter> {
  const writer = await store.createRun({
    kind: "run",
    tune_id: null,
    command: ["python", "train.py"],
    cwd: root,
    knobs: {},
    cap_bytes: null,
    cap_scope: "ram",
    step_budget: null,
    device: { backend: "cpu", driver: null, gpus: [], host: { cpus: 2, mem_total_bytes: 2 ** 33 } },
    versions: {},
  });
  for (let i = 0; i < steps; i++) writer.append(step(i));
  writer.flush();
  return writer;
}

function step(i: number): TimelineEntry {
  return { t: 1000 + i, kind: "step", pid: 1, step: i, samples: 8, compute_s: 0.01, wait_s: 0.001 };
}

/** Opens a stream, reads `readMs` of it (0: drop as soon as the answer starts), then drops it; resolves with the status. */
function touch(url: string, readMs: number): Promise<number> {
  return new Promise((resolve) => {
    const req = get(url, (res: IncomingMessage) => {
      res.on("data", () => {});
      res.on("error", () => {});
      setTimeout(() => req.destroy(), readMs);
      res.on("close", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", () => resolve(0));
  });
}

/** First `entries` event of a stream, or null after `ms`. */
/**
 * The first entries a live stream sends, or null when none came within `ms`. A clear refusal (429 or
 * 503: the streams just dropped not yet all counted closed by a busy server) is asked again a second
 * later, as a browser's EventSource does, until the time is up.
 */
async function firstEntries(url: string, ms: number): Promise<TimelineEntry[] | null> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await entriesOnce(url, Math.max(1, deadline - Date.now()));
    if (got.entries !== null || (got.status !== 429 && got.status !== 503) || Date.now() + 1000 >= deadline) return got.entries;
    await sleep(1000);
  }
}

function entriesOnce(url: string, ms: number): Promise<{ entries: TimelineEntry[] | null; status: number }> {
  return new Promise((resolve) => {
    let text = "";
    let status = 0;
    const req = get(url, (res) => {
      status = res.statusCode ?? 0;
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        text += chunk;
        const m = /event: entries\ndata: (.*)\n\n/.exec(text);
        if (m?.[1] !== undefined) {
          req.destroy();
          resolve({ entries: JSON.parse(m[1]) as TimelineEntry[], status });
        }
      });
      res.on("end", () => resolve({ entries: null, status }));
    });
    req.on("error", () => resolve({ entries: null, status }));
    setTimeout(() => {
      req.destroy();
      resolve({ entries: null, status });
    }, ms);
  });
}

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? 0) * 1024;
}

function openSockets(pid: number): number {
  let n = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("socket:")) n++;
    } catch {
      // closed while listed
    }
  }
  return n;
}

describe("bounded live streams (in process)", () => {
  it("one feed per run whatever the clients; 503 past the total, 429 past one address; nothing runs after they leave", async () => {
    const store = new RunStore(join(root, "limits"));
    const writer = await liveRun(store, 500);
    const dash = await startDashboard({ store, port: 0, token: null, pollMs: 20, maxStreams: 12, maxStreamsPerClient: 8, lingerMs: 100 });
    try {
      const url = `http://127.0.0.1:${dash.port}/api/runs/${writer.id}/events?from=0`;
      const held = Array.from({ length: 8 }, () => {
        let r: IncomingMessage | null = null;
        const req = get(url, (res) => {
          r = res;
          res.on("data", () => {});
        });
        req.on("error", () => {});
        return { req, res: () => r };
      });
      expect(await until(() => dash.openStreams() === 8, 5000)).toBe(true);
      expect(dash.openFeeds()).toBe(1);
      const refused = await new Promise<{ status: number; body: string; retry: string | undefined }>((resolve) =>
        get(url, (res) => {
          let body = "";
          res.on("data", (c: Buffer) => (body += c.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body, retry: res.headers["retry-after"] }));
        }),
      );
      expect(refused.status).toBe(429);
      expect(refused.body).toMatch(/too many live streams from .* \(8\)/);
      expect(refused.retry).toBe("5");
      for (const h of held) h.req.destroy();
      expect(await until(() => dash.openStreams() === 0, 3000)).toBe(true);
      expect(await until(() => dash.openFeeds() === 0, 3000)).toBe(true);
    } finally {
      await dash.close();
      await writer.finish({ cause: "ok", exit_code: 0, signal: null, message: "" }, null);
    }
  });

  it("answers 503 with a reason past the total", async () => {
    const store = new RunStore(join(root, "total"));
    const writer = await liveRun(store, 10);
    const dash = await startDashboard({ store, port: 0, token: null, pollMs: 20, maxStreams: 3, maxStreamsPerClient: 10 });
    try {
      const url = `http://127.0.0.1:${dash.port}/api/runs/${writer.id}/events`;
      const reqs = Array.from({ length: 3 }, () => get(url, (res) => res.on("data", () => {})).on("error", () => {}));
      expect(await until(() => dash.openStreams() === 3, 5000)).toBe(true);
      const status = await touch(url, 0);
      expect(status).toBe(503);
      for (const r of reqs) r.destroy();
      expect(await until(() => dash.openStreams() === 0, 3000)).toBe(true);
    } finally {
      await dash.close();
      await writer.finish({ cause: "ok", exit_code: 0, signal: null, message: "" }, null);
    }
  });
});

describe("lingering feeds", () => {
  it("a storm across many runs leaves no more feeds than streams allowed, however long they would linger", async () => {
    const store = new RunStore(join(root, "many"));
    const writers = await Promise.all(Array.from({ length: 6 }, () => liveRun(store, 50)));
    const dash = await startDashboard({ store, port: 0, token: null, pollMs: 20, maxStreams: 2, maxStreamsPerClient: 2, lingerMs: 60_000 });
    try {
      for (const w of writers) await touch(`http://127.0.0.1:${dash.port}/api/runs/${w.id}/events?from=0`, 30);
      expect(await until(() => dash.openStreams() === 0, 3000)).toBe(true);
      expect(dash.openFeeds()).toBeLessThanOrEqual(2);
    } finally {
      await dash.close();
      for (const w of writers) await w.finish({ cause: "ok", exit_code: 0, signal: null, message: "" }, null);
    }
  });
});

describe("`brim dashboard` under a storm of 1,500 streams opened and dropped", () => {
  let child: ChildProcess;
  let base = "";
  let writer: RunWriter;
  let grow: NodeJS.Timeout;
  let steps = 20_000;

  beforeAll(async () => {
    const store = new RunStore(join(root, "storm"));
    writer = await liveRun(store, steps);
    grow = setInterval(() => {
      for (let i = 0; i < 20; i++) writer.append(step(steps++));
      writer.flush();
    }, 100);
    child = spawn(process.execPath, ["--import", "tsx", join(REPO, "test", "dashboard", "cli-fixture.ts"), "dashboard", "--port", "0", "--store", store.root], {
      cwd: REPO,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout?.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr?.on("data", (c: Buffer) => (out += c.toString()));
    expect(await until(() => /brim dashboard: (http:\S+)/.test(out), 20_000), out).toBe(true);
    base = (/brim dashboard: (http:\S+)/.exec(out)?.[1] ?? "").replace(/\/(\?.*)?$/, "");
    const query = /\?(.*)$/.exec(/brim dashboard: (http:\S+)/.exec(out)?.[1] ?? "")?.[1];
    base = `${base}/api/runs/${writer.id}/events?from=0${query !== undefined ? `&${query}` : ""}`;
  }, scaled(30_000));

  afterAll(async () => {
    clearInterval(grow);
    child?.kill("SIGTERM");
    await writer?.finish({ cause: "ok", exit_code: 0, signal: null, message: "" }, null);
  });

  it(
    "stays up, its memory within 50 MB of before, every stream ended, the run's stream still live",
    async () => {
      // Warm: the feed built once and left, so that "before" counts what a served stream costs.
      expect(await firstEntries(base, scaled(10_000))).not.toBeNull();
      await sleep(500);
      const pid = child.pid as number;
      const before = rssBytes(pid);
      const socketsBefore = openSockets(pid);
      const statuses = new Map<number, number>();
      for (let round = 0; round < 15; round++) {
        const got = await Promise.all(Array.from({ length: 100 }, (_, i) => touch(base, i % 4 === 0 ? 0 : 5 + (i % 50))));
        for (const s of got) statuses.set(s, (statuses.get(s) ?? 0) + 1);
      }
      const odd = [...statuses].filter(([s]) => s !== 200 && s !== 503 && s !== 429 && s !== 0).reduce((n, [, c]) => n + c, 0);
      const closed = await until(() => openSockets(pid) <= socketsBefore, 10_000);
      await sleep(1000);
      const grown = rssBytes(pid) - before;
      noteOutcome(
        "live-stream connections opened and dropped against a live run (brim dashboard, own process)",
        1500,
        odd + (closed ? 0 : 1) + (grown < 50 * 2 ** 20 ? 0 : 1) + (child.exitCode === null ? 0 : 1),
        "test/dashboard/storm.e2e.test.ts",
        {
          rss_before_mb: Math.round(before / 2 ** 20),
          rss_after_mb: Math.round((before + grown) / 2 ** 20),
        },
      );
      expect(child.exitCode).toBeNull();
      // Every answer was a stream (200) or a clear refusal (503/429); none an error or a dropped server.
      expect(
        [...statuses.keys()].every((s) => s === 200 || s === 503 || s === 429 || s === 0),
        JSON.stringify([...statuses]),
      ).toBe(true);
      expect(statuses.get(200) ?? 0).toBeGreaterThan(0);
      expect(await until(() => openSockets(pid) <= socketsBefore, 10_000)).toBe(true);
      await sleep(1000);
      const after = rssBytes(pid);
      console.log(`dashboard RSS ${(before / 2 ** 20).toFixed(0)} MB → ${(after / 2 ** 20).toFixed(0)} MB; answers ${JSON.stringify([...statuses])}`);
      expect(after - before).toBeLessThan(50 * 2 ** 20);
      const live = await firstEntries(base.replace(/from=0/, `from=${Number.MAX_SAFE_INTEGER}`), scaled(10_000));
      expect(live).not.toBeNull();
      expect(live?.[0]?.kind).toBe("step");
    },
    scaled(120_000),
  );
});
