import { spawn, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { RunMeta, RunSummary } from "../../src/record/types.ts";
import { scaled } from "../helpers/time.ts";

// These tests run the built CLI (npm test builds dist/ first) as a real process, as a user would.
const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-run-cli-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function brim(args: string[], options: { cwd?: string } = {}): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [BRIM, ...args], {
    cwd: options.cwd ?? root,
    encoding: "utf8",
    env: { ...process.env, NO_COLOR: "1" },
    timeout: scaled(120_000),
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function runIds(store: string): string[] {
  try {
    return readdirSync(join(store, "runs")).sort();
  } catch {
    return [];
  }
}

describe("brim run (the built CLI as a real process)", () => {
  it("runs an example under a RAM cap, passes its output through, prints a summary and records the run", () => {
    // the example's own code and config.yaml, on narrower layers: what is asserted is the run's output,
    // summary and record, never the speed, and the full width costs tens of CPU seconds for 12 steps (it
    // runs whole in test/examples and python/tests/test_examples.py)
    const example = join(root, "examples", "nbeats");
    for (const dir of ["nbeats", "common"])
      cpSync(join(REPO, "examples", dir), join(root, "examples", dir), {
        recursive: true,
        filter: (path) => !path.includes(".data") && !path.includes("__pycache__"),
      });
    const spec = join(example, "model.yaml");
    const text = readFileSync(spec, "utf8");
    if (!/^units: 512$/m.test(text)) throw new Error(`${spec} no longer has units: 512: narrow it here anew`);
    writeFileSync(spec, text.replace(/^units: 512$/m, "units: 64"));
    const store = join(root, "store-nbeats");
    const result = brim([
      "run",
      "--store",
      store,
      "--cap",
      "3GiB",
      "--steps",
      "12",
      "--",
      PYTHON,
      join(example, "train.py"),
      "--config",
      join(example, "config.yaml"),
    ]);
    expect(result.stderr).toContain("no NVIDIA GPU");
    expect(result.stdout).toMatch(/\[nbeats\] done steps=12/);
    expect(result.stderr).toMatch(/brim: run \d{8}-\d{6}-[0-9a-f]{4} ended: ok/);
    expect(result.stderr).toMatch(/throughput\s+[\d.]+ samples\/s over 9 steady steps/);
    expect(result.stderr).toMatch(/peak memory\s+[\d.]+ [MG]iB RAM \(PSS of the process tree; RSS [\d.]+ [MG]iB\) of the 3\.00 GiB cap/);
    expect(result.status).toBe(0);
    const [id] = runIds(store);
    const meta = JSON.parse(readFileSync(join(store, "runs", id as string, "run.json"), "utf8")) as RunMeta & { summary: RunSummary };
    expect(meta.summary.steady_steps).toBe(9);
    expect(meta.versions.torch).toMatch(/^\d/);
    expect(readFileSync(join(store, "runs", id as string, "output.log"), "utf8")).toMatch(/^1 \[nbeats\] done/m);
  });

  it("gives the job's exit code and says how it ended", () => {
    const store = join(root, "store-exit");
    const result = brim(["run", "--store", store, "--quiet", "--", "sh", "-c", "echo bye >&2; exit 7"]);
    expect(result.status).toBe(7);
    expect(result.stderr).toContain("bye");
    expect(result.stderr).toMatch(/ended: crashed — the job failed with exit code 7/);
  });

  it("prints the run record as JSON with --json", () => {
    const store = join(root, "store-json");
    const result = brim(["run", "--store", store, "--json", "--", "sh", "-c", "echo hidden"]);
    expect(result.status).toBe(0);
    const meta = JSON.parse(result.stdout) as RunMeta;
    expect(meta.schema).toBe("brim.run/v1");
    expect(meta.end?.cause).toBe("ok");
  });

  it("one line and the shell's 127 for a command that does not exist, 126 for one it cannot execute; exit 2 for a bad option", () => {
    const missing = brim(["run", "--store", join(root, "s2"), "--", "no-such-trainer-xyz"]);
    expect(missing.status).toBe(127);
    expect(missing.stderr.trim().split("\n").at(-1)).toBe("brim: cannot start 'no-such-trainer-xyz': command not found");
    const script = join(root, "not-executable.sh");
    writeFileSync(script, "echo never\n", { mode: 0o644 });
    const denied = brim(["run", "--store", join(root, "s2"), "--", script]);
    expect(denied.status).toBe(126);
    expect(denied.stderr.trim().split("\n").at(-1)).toBe(`brim: cannot start '${script}': permission denied`);
    const bad = brim(["run", "--cap", "lots", "--", "true"]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/lots/);
    const none = brim(["run"]);
    expect(none.status).toBe(2);
  });

  it("forwards Ctrl-C to the job's whole tree, records it as interrupted, leaves nothing running", async () => {
    const store = join(root, "store-int");
    const child = spawn(process.execPath, [BRIM, "run", "--store", store, "--quiet", "--", "sh", "-c", "sleep 60 & echo child $!; sleep 60 & wait"], {
      cwd: root,
      env: { ...process.env, NO_COLOR: "1" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const deadline = Date.now() + scaled(20_000);
    while (!/child \d+/.test(stdout) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const pid = Number(/child (\d+)/.exec(stdout)?.[1]);
    child.kill("SIGINT");
    const status = await new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    expect(stderr).toMatch(/ended: interrupted/);
    expect(status).toBe(130);
    const state = (() => {
      try {
        return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0];
      } catch {
        return "gone";
      }
    })();
    expect(["gone", "Z"]).toContain(state);
    const [id] = runIds(store);
    const timeline = readFileSync(join(store, "runs", id as string, "timeline.ndjson"), "utf8");
    expect(timeline).toContain('"event":"signal_forwarded"');
  });

  it("serves Prometheus metrics while the job runs", async () => {
    const store = join(root, "store-prom");
    const port = 19_000 + Math.floor(Math.random() * 1000);
    const script = "import time, brim\nfor _ in brim.track(range(150), samples=4):\n    time.sleep(0.02)";
    const child = spawn(
      process.execPath,
      [BRIM, "run", "--store", store, "--quiet", "--prometheus", String(port), "--warmup", "1", "--", PYTHON, "-c", script],
      { cwd: root },
    );
    let body = "";
    const deadline = Date.now() + scaled(20_000);
    while (!body.includes("brim_samples_per_second") && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      body = await new Promise<string>((done) => {
        const req = request({ host: "127.0.0.1", port, path: "/metrics" }, (res) => {
          let text = "";
          res.on("data", (chunk: Buffer) => (text += chunk.toString()));
          res.on("end", () => done(text));
        });
        req.on("error", () => done(""));
        req.end();
      });
    }
    await new Promise((r) => child.on("exit", r));
    expect(body).toMatch(/^brim_samples_per_second\{[^}]*run_id="\d{8}-\d{6}-[0-9a-f]{4}"[^}]*\} [\d.]+$/m);
    expect(body).toMatch(/^brim_memory_used_bytes\{.*\} \d+$/m);
  });
});
