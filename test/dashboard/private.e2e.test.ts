// Private by default on a shared machine: the dashboard's token (on loopback too), the store's file
// modes, the metrics port's Host check, and a probe run as another local user (`nobody`).
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { request } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import { startDashboard } from "../../src/dashboard/server.ts";
import { tokenPath } from "../../src/dashboard/token.ts";
import { serveMetrics } from "../../src/metrics/prometheus.ts";
import { RunStore } from "../../src/record/store.ts";
import { noteOutcome } from "../helpers/outcomes.ts";

const root = mkdtempSync(join(tmpdir(), "brim-private-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function get(port: number, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, headers }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

async function newRun(store: RunStore): Promise<string> {
  const writer = await store.createRun({
    kind: "run",
    tune_id: null,
    command: ["python", "secret_project/train.py", "--api-key", "hunter2"],
    cwd: "/home/alice/secret_project",
    knobs: {},
    cap_bytes: null,
    cap_scope: "ram",
    step_budget: null,
    device: { backend: "cpu", driver: null, gpus: [], host: { cpus: 2, mem_total_bytes: 2 ** 33 } },
    versions: {},
  });
  writer.append({ t: 1, kind: "start", pid: 1 });
  await writer.finish({ cause: "ok", exit_code: 0, signal: null, message: "finished normally" }, null);
  return writer.id;
}

const mode = (path: string): number => statSync(path).mode & 0o777;

describe("the dashboard's token", () => {
  it("is required on loopback by default, kept 0600 in the store, printed in the URL, the same after a restart", async () => {
    const store = new RunStore(join(root, "token"));
    await newRun(store);
    const dash = await startDashboard({ store, port: 0 });
    let token: string | null = null;
    try {
      token = dash.token;
      expect(token).toMatch(/^[A-Za-z0-9_-]{24}$/);
      expect(dash.url).toBe(`http://127.0.0.1:${dash.port}/?token=${token}`);
      expect(dash.tokenFile).toBe(tokenPath(store.root));
      expect(readFileSync(tokenPath(store.root), "utf8").trim()).toBe(token);
      expect(mode(tokenPath(store.root))).toBe(0o600);
      const none = await get(dash.port, "/api/runs");
      expect(none.status).toBe(401);
      expect(none.body).not.toMatch(/hunter2|secret_project/);
      expect((await get(dash.port, "/api/runs?token=wrong")).status).toBe(401);
      expect((await get(dash.port, "/")).status).toBe(401);
      const ok = await get(dash.port, `/api/runs?token=${token}`);
      expect(ok.status).toBe(200);
      expect(ok.body).toMatch(/secret_project/);
    } finally {
      await dash.close();
    }
    chmodSync(tokenPath(store.root), 0o644);
    const again = await startDashboard({ store, port: 0 });
    try {
      expect(again.token).toBe(token);
      expect(mode(tokenPath(store.root))).toBe(0o600);
    } finally {
      await again.close();
    }
  });

  it("a store brim cannot write still gets a token, for this dashboard only", async () => {
    if (process.getuid?.() === 0) return; // root writes anywhere; the nobody probe below covers another user
    const dir = join(root, "readonly");
    const store = new RunStore(dir);
    await newRun(store);
    chmodSync(dir, 0o500);
    try {
      const dash = await startDashboard({ store, port: 0 });
      expect(dash.token).toMatch(/^[A-Za-z0-9_-]{24}$/);
      expect(dash.tokenFile).toBeNull();
      await dash.close();
    } finally {
      chmodSync(dir, 0o700);
    }
  });
});

describe("a store that does not exist yet", () => {
  it("gets a token for this dashboard only, and no folder is made for it", async () => {
    const dir = join(root, "not-yet", ".brim");
    const dash = await startDashboard({ store: new RunStore(dir), port: 0 });
    try {
      expect(dash.token).toMatch(/^[A-Za-z0-9_-]{24}$/);
      expect(dash.tokenFile).toBeNull();
      expect(existsSync(dir)).toBe(false);
      expect((await get(dash.port, "/api/runs")).status).toBe(401);
    } finally {
      await dash.close();
    }
  });
});

describe("the run store's modes", () => {
  it("folders brim makes are 0700, the files of a run 0600", async () => {
    const store = new RunStore(join(root, "modes", ".brim"));
    const id = await newRun(store);
    expect(mode(store.root)).toBe(0o700);
    expect(mode(join(store.root, "runs"))).toBe(0o700);
    expect(mode(store.runDir(id))).toBe(0o700);
    expect(mode(join(store.runDir(id), "run.json"))).toBe(0o600);
    expect(mode(join(store.runDir(id), "timeline.ndjson"))).toBe(0o600);
  });
});

describe("the metrics port", () => {
  it("answers loopback host names only (no DNS rebinding)", async () => {
    const port = await freePort();
    const server = await serveMetrics(port, () => "brim_up 1\n");
    try {
      expect((await get(port, "/metrics")).status).toBe(200);
      expect((await get(port, "/metrics", { Host: `localhost:${port}` })).body).toBe("brim_up 1\n");
      const evil = await get(port, "/metrics", { Host: `rebind.example:${port}` });
      noteOutcome("metrics request with a foreign Host header (DNS rebinding)", 1, evil.status === 403 ? 0 : 1, "test/dashboard/private.e2e.test.ts");
      expect(evil.status).toBe(403);
      expect(evil.body).not.toMatch(/brim_up/);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("a port out of range is a one-line usage error, before anything runs", async () => {
    await expect(serveMetrics(99999, () => "")).rejects.toThrow(/^--prometheus 99999: a port is a whole number from 1 to 65535$/);
    let stderr = "";
    const code = await main(["run", "--store", join(root, "unused"), "--prometheus", "99999", "--", "true"], {
      stdout: () => {},
      stderr: (t) => void (stderr += t),
    });
    noteOutcome("--prometheus 99999", 1, code === 2 && !stderr.includes("\n    at ") ? 0 : 1, "test/dashboard/private.e2e.test.ts");
    expect(code).toBe(2);
    expect(stderr).toBe("brim: --prometheus 99999: give [host:]port, e.g. 9400 (127.0.0.1 only) or 0.0.0.0:9400, a port from 1 to 65535\n");
    expect(existsSync(join(root, "unused"))).toBe(false);
  });
});

describe("another local user", () => {
  const setpriv = spawnSync("sh", ["-c", "command -v setpriv"], { encoding: "utf8" }).stdout.trim();
  const canSwitch = process.getuid?.() === 0 && setpriv !== "";

  it.skipIf(!canSwitch)("gets 401 from the dashboard and cannot read the token or the runs (probe run as nobody)", async () => {
    // A project folder others may enter, as on a shared box: only the store keeps them out.
    const store = new RunStore(join(root, "shared-box", ".brim"));
    const id = await newRun(store);
    chmodSync(root, 0o755);
    chmodSync(join(root, "shared-box"), 0o755);
    const dash = await startDashboard({ store, port: 0 });
    try {
      const probe = `
const fs = require("node:fs");
const out = {};
for (const [name, path] of Object.entries(${JSON.stringify({ token: tokenPath(store.root), run: join(store.runDir(id), "run.json"), runs: join(store.root, "runs") })})) {
  try { fs.statSync(path).isDirectory() ? fs.readdirSync(path) : fs.readFileSync(path); out[name] = "read"; } catch (e) { out[name] = e.code; }
}
(async () => {
  for (const path of ["/", "/api/runs", "/api/runs/${id}", "/api/runs/${id}/events"]) {
    const r = await fetch("http://127.0.0.1:${dash.port}" + path);
    out[path] = r.status;
    await r.body?.cancel();
  }
  console.log(JSON.stringify(out));
})();
`;
      const r = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(setpriv, ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, "-e", probe], {
          cwd: "/",
          stdio: ["ignore", "pipe", "pipe"],
        });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
        child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
        child.on("close", (code) => resolve({ code, stdout, stderr }));
      });
      expect(r.code, r.stderr).toBe(0);
      const seen = JSON.parse(r.stdout) as Record<string, string | number>;
      const leaks = Object.values(seen).filter((v) => v !== 401 && v !== "EACCES").length;
      noteOutcome(
        "another local user (nobody): dashboard requests without the token, reads of the token, run.json and runs/",
        Object.keys(seen).length,
        leaks,
        "test/dashboard/private.e2e.test.ts",
      );
      expect(seen).toEqual({
        token: "EACCES",
        run: "EACCES",
        runs: "EACCES",
        "/": 401,
        "/api/runs": 401,
        [`/api/runs/${id}`]: 401,
        [`/api/runs/${id}/events`]: 401,
      });
    } finally {
      await dash.close();
    }
  });
});
