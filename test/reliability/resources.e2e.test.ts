// The fault suite, part 2: a store that fails mid-run (injected through the store's file calls, so it
// runs everywhere), channel floods and strangers, aborted dashboard streams, fuzzed configs, stale sockets.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { get } from "node:http";
import { createConnection, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/configs/document.ts";
import { startDashboard } from "../../src/dashboard/server.ts";
import { openDevices } from "../../src/devices/index.ts";
import { createTreeReader, ProcFs } from "../../src/devices/procfs.ts";
import { BrimError } from "../../src/errors/index.ts";
import { guardRun } from "../../src/guard/guard.ts";
import { Watchdog } from "../../src/guard/watchdog.ts";
import { ChannelServer, MAX_BUFFERED_BYTES, removeStaleSockets, type ChannelMessage } from "../../src/job/channel.ts";
import { RunStore } from "../../src/record/store.ts";
import { realStoreIo, type StoreIo } from "../../src/record/writer.ts";
import { groupMembers, sleep, tornIn, until } from "./faults.ts";
import { scaled } from "../helpers/time.ts";

const root = mkdtempSync(join(tmpdir(), "brim-resources-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** File calls that accept `budget` bytes, then write half of the next chunk and fail with `code`. */
function failingIo(budget: number, code: "ENOSPC" | "EROFS"): StoreIo {
  let left = budget;
  return {
    ...realStoreIo,
    writeSync(fd, buffer, offset, length) {
      if (left <= 0) throw Object.assign(new Error(`${code}: injected, write`), { code });
      const n = Math.min(length, left, Math.max(1, Math.floor(length / 2)));
      left -= n;
      return realStoreIo.writeSync(fd, buffer, offset, n);
    },
  };
}

describe("a store that fails while the job runs", () => {
  for (const code of ["ENOSPC", "EROFS"] as const) {
    it(`${code}: the job is stopped, run.json finished with store_failed, whole lines only, no stack trace`, async () => {
      const dir = join(root, `store-${code}`);
      const result = await guardRun(
        {
          command: ["sh", "-c", 'i=0; while [ $i -lt 20000 ]; do echo "line $i padding padding"; i=$((i+1)); done; sleep 30'],
          cwd: root,
          capBytes: null,
          killGraceS: 1,
          hz: 20,
        },
        { devices: openDevices(), store: new RunStore(dir, failingIo(30_000, code)) },
      );
      expect(result.meta.end?.cause).toBe("store_failed");
      expect(result.meta.end?.message).toMatch(code === "ENOSPC" ? /no space left on the device/ : /read-only file system/);
      expect(result.meta.end?.message.includes("\n")).toBe(false);
      expect(groupMembers(result.job.pid)).toEqual([]);
      expect(tornIn(dir)).toBe(0);
      // The injected disk never frees space, so the end entry itself may be refused: run.json has the end.
      expect(result.meta.ended_at).not.toBeNull();
    });
  }
});

describe("a guard handler that throws", () => {
  it("an I/O error in a handler ends the run store_failed, any other error supervisor_lost; the job is stopped either way", async () => {
    for (const [error, cause] of [
      [Object.assign(new Error("EPIPE: broken pipe, write"), { code: "EPIPE" }), "store_failed"],
      [new TypeError("cannot read properties of undefined"), "supervisor_lost"],
    ] as const) {
      const result = await guardRun(
        {
          command: ["sh", "-c", "echo first; sleep 30"],
          cwd: root,
          capBytes: null,
          killGraceS: 1,
          onOutput: () => {
            throw error;
          },
        },
        { devices: openDevices(), store: new RunStore(join(root, `handler-${cause}`)) },
      );
      expect(result.meta.end?.cause).toBe(cause);
      expect(result.meta.end?.message.includes("\n")).toBe(false);
      expect(groupMembers(result.job.pid)).toEqual([]);
      expect(result.job.endedAt - result.job.startedAt).toBeLessThan(10);
    }
  });
});

describe("the SDK channel under floods and strangers", () => {
  const hello = (extra: Record<string, unknown>): string => `${JSON.stringify({ v: 1, type: "hello", t: 1, pid: 4242, ...extra })}\n`;
  const connect = (path: string): Promise<Socket> =>
    new Promise((resolve, reject) => {
      const socket = createConnection(path, () => resolve(socket));
      socket.on("error", reject);
    });

  it("admits a hello with the run's token, refuses a wrong token, no hello, or a pid outside the job", async () => {
    const received: ChannelMessage[] = [];
    const server = await ChannelServer.listen((m) => received.push(m), { admission: { token: "s3cret", admitPid: (pid) => pid === 7 } });
    const send = async (text: string): Promise<void> => {
      const socket = await connect(server.path);
      socket.on("error", () => {});
      socket.end(text);
    };
    await send(`${hello({ token: "s3cret" })}{"v":1,"type":"step","t":2,"pid":4242}\n`);
    await send(`${hello({ token: "wrong" })}{"v":1,"type":"step","t":2,"pid":4242}\n`);
    await send('{"v":1,"type":"step","t":2,"pid":4242}\n');
    await send(`${hello({})}{"v":1,"type":"step","t":2,"pid":4242}\n`);
    await send(`${hello({ pid: 7 })}{"v":1,"type":"step","t":2,"pid":7}\n`);
    await until(() => server.stats.refused >= 3 && received.length >= 4, 5000);
    expect(server.stats.refused).toBe(3);
    expect(server.stats.admittedByPid).toBe(1);
    expect(received.map((m) => `${m.pid}:${m.type}`)).toEqual(["4242:hello", "4242:step", "7:hello", "7:step"]);
    expect(received.every((m) => m.token === undefined)).toBe(true);
    expect((await import("node:fs")).statSync(server.path).mode & 0o777).toBe(0o600);
    await server.close();
    expect(existsSync(server.path)).toBe(false);
  });

  it("bounds the bytes held for unfinished lines over all connections, and goes on serving", async () => {
    const received: ChannelMessage[] = [];
    const server = await ChannelServer.listen((m) => received.push(m), { admission: { token: "t" } });
    const chunk = Buffer.alloc(2 ** 20, 0x61);
    const sockets = await Promise.all(Array.from({ length: 12 }, () => connect(server.path)));
    await Promise.all(
      sockets.map(async (socket) => {
        socket.on("error", () => {});
        socket.write(hello({ token: "t" }));
        for (let i = 0; i < 8 && !socket.destroyed; i++) {
          await new Promise<void>((resolve) => {
            if (socket.write(chunk)) resolve();
            else {
              socket.once("drain", resolve);
              socket.once("close", resolve);
            }
          });
          await sleep(1);
        }
      }),
    );
    await until(() => server.stats.overflowed >= 4, 5000);
    expect(server.stats.overflowed).toBeGreaterThanOrEqual(12 - Math.floor(MAX_BUFFERED_BYTES / (8 * 2 ** 20)));
    const ok = await connect(server.path);
    ok.end(`${hello({ token: "t" })}{"v":1,"type":"step","t":2,"pid":4242}\n`);
    await until(() => received.some((m) => m.type === "step"), 5000);
    expect(received.some((m) => m.type === "step")).toBe(true);
    for (const socket of sockets) socket.destroy();
    await server.close();
  });

  it("removes sockets left by a brim that no longer runs, and only those", () => {
    const dead = spawnSync("true").pid;
    const stale = join(tmpdir(), `brim-${dead}-${randomBytes(4).toString("hex")}.sock`);
    const mine = join(tmpdir(), `brim-${process.pid}-${randomBytes(4).toString("hex")}.sock`);
    writeFileSync(stale, "");
    writeFileSync(mine, "");
    removeStaleSockets();
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(mine)).toBe(true);
    rmSync(mine);
  });
});

describe("a stranger on a real job's channel", () => {
  it("is refused, counted, and recorded in the timeline; the job's own SDK steps still count", async () => {
    const dir = join(root, "stranger");
    const script =
      "import brim, time\nfor _ in range(5):\n    brim.report_step(samples=4, wait_s=0.001, compute_s=0.01)\n    time.sleep(0.05)\ntime.sleep(1.0)\n";
    let sent = false;
    const result = await guardRun(
      {
        command: [process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3", "-c", script],
        cwd: root,
        capBytes: null,
        onStart: () => {
          const name = readdirSync(tmpdir()).find((n) => n.startsWith(`brim-${process.pid}-`) && n.endsWith(".sock"));
          if (name === undefined) return;
          const socket = createConnection(join(tmpdir(), name), () => {
            socket.end(
              `${JSON.stringify({ v: 1, type: "hello", t: 1, pid: 1 })}\n${JSON.stringify({ v: 1, type: "step", t: 2, pid: 1, step: 0, samples: 999 })}\n`,
            );
            sent = true;
          });
          socket.on("error", () => {});
        },
      },
      { devices: openDevices(), store: new RunStore(dir) },
    );
    expect(sent).toBe(true);
    expect(result.job.channel.refused).toBe(1);
    expect(result.timeline.events.some((e) => e.event === "channel_refused")).toBe(true);
    expect(result.timeline.steps.every((e) => e.pid !== 1)).toBe(true);
    expect(result.summary.steps).toBe(5);
  });
});

describe("dashboard event streams", () => {
  it("stop polling when clients leave at any moment (200 aborted streams leave none open)", async () => {
    const store = new RunStore(join(root, "dash"));
    const writer = await store.createRun({
      kind: "run",
      tune_id: null,
      command: ["x"],
      cwd: root,
      knobs: {},
      cap_bytes: null,
      cap_scope: "ram",
      step_budget: null,
      device: { backend: "cpu", driver: null, gpus: [], host: { cpus: 2, mem_total_bytes: 2 ** 33 } },
      versions: {},
    });
    for (let i = 0; i < 2000; i++) writer.append({ t: 1 + i, kind: "step", pid: 1, step: i, samples: 8, compute_s: 0.01, wait_s: 0.001 });
    writer.flush();
    const dash = await startDashboard({ store, port: 0, token: null, pollMs: 20 });
    const url = `http://127.0.0.1:${dash.port}/api/runs/${writer.id}/events`;
    await Promise.all(
      Array.from(
        { length: 200 },
        (_, i) =>
          new Promise<void>((resolve) => {
            const req = get(url, (res) => {
              res.on("data", () => {});
              res.on("close", () => resolve());
              setTimeout(() => req.destroy(), i % 3 === 0 ? 0 : 5 + (i % 20));
            });
            req.on("error", () => resolve());
            req.on("close", () => resolve());
            if (i % 5 === 0) setImmediate(() => req.destroy());
          }),
      ),
    );
    expect(await until(() => dash.openStreams() === 0, 3000)).toBe(true);
    await dash.close();
    await writer.finish({ cause: "ok", exit_code: 0, signal: null, message: "" }, null);
  });
});

describe("fuzzed configs", () => {
  const seeds: [string, "yaml" | "toml" | "json"][] = [
    ["trainer:\n  batch_size: 16  # per GPU\n  lr: 3.0e-4\nstages:\n  - {name: a, epochs: 2}\n  - name: b\n", "yaml"],
    ['[data_loader]\nbatch_size = 16\nworkers = 4\n[[stage]]\nname = "warm"\nlr = [1e-3, 2e-3]\n', "toml"],
    ['{\n  "batch_size": 16,\n  "optim": {"lr": 0.001, "betas": [0.9, 0.999]}\n}\n', "json"],
  ];
  const noise = ["[", "{", "]", "}", ":", "=", "\n", " ", "'", '"', "#", "&a", "*a", "<<", "- ", ",", "\\", "\u0000", "\t", "...", "---", "x"];

  it("either parse or fail with a one-line BrimError, quickly, for 600 mutated and absurd inputs", () => {
    let seed = 12345;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const inputs: [string, "yaml" | "toml" | "json"][] = [
      [`a = ${"[".repeat(5000)}${"]".repeat(5000)}\n`, "toml"],
      [`[${Array.from({ length: 3000 }, (_, i) => `k${i}`).join(".")}]\nx = 1\n`, "toml"],
      [`${"[".repeat(20000)}${"]".repeat(20000)}`, "json"],
      [`a: ${"[".repeat(3000)}${"]".repeat(3000)}\n`, "yaml"],
      [Array.from({ length: 12000 }, (_, i) => `k${i}: ${i}`).join("\n"), "yaml"],
    ];
    for (let i = 0; i < 600; i++) {
      const [text, format] = seeds[i % seeds.length] as [string, "yaml" | "toml" | "json"];
      const chars = [...text];
      for (let k = 0; k < 1 + rand(6); k++) chars.splice(rand(chars.length + 1), rand(3), noise[rand(noise.length)] as string);
      inputs.push([chars.join(""), format]);
    }
    for (const [text, format] of inputs) {
      const started = Date.now();
      try {
        parseConfig(text, format, `fuzz.${format}`);
      } catch (error) {
        expect(error).toBeInstanceOf(BrimError);
        expect((error as Error).message.includes("\n")).toBe(false);
        expect((error as BrimError).code).not.toBe("E_INTERNAL");
      }
      // a hang detector, not a speed verdict: its limit grows with the machine's load
      expect(Date.now() - started).toBeLessThan(scaled(8000));
    }
  });
});

describe("RAM counted as the OS counts it", () => {
  it("a real process that forks three children holding its pages: PSS counts them once, RSS four times", async () => {
    const script =
      "import os, time\nb = bytearray(96 * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\nfor _ in range(3):\n    if os.fork() == 0:\n        time.sleep(5); os._exit(0)\nprint('ready', flush=True)\ntime.sleep(5)\n";
    const child = spawn(process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3", ["-c", script], { stdio: ["ignore", "pipe", "ignore"] });
    await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
    const trees = createTreeReader(new ProcFs());
    let tree = trees.read(child.pid as number);
    for (let i = 0; i < 5; i++) {
      await sleep(50);
      tree = trees.read(child.pid as number);
    }
    child.kill("SIGKILL");
    for (const pid of tree.pids) if (pid !== child.pid) process.kill(pid, "SIGKILL");
    expect(tree.pids.length).toBe(4);
    expect(tree.rssBytes).toBeGreaterThan(4 * 90 * 2 ** 20);
    expect(tree.pssBytes).not.toBeNull();
    expect(tree.pssBytes as number).toBeLessThan(tree.rssBytes / 2);
    expect(tree.pssBytes as number).toBeGreaterThan(90 * 2 ** 20);
  });
});

describe("no stale state after a normal run", () => {
  it("leaves no socket and no reserve file behind", async () => {
    const dir = join(root, "clean");
    const result = await guardRun({ command: ["sh", "-c", "echo hi"], cwd: root, capBytes: null }, { devices: openDevices(), store: new RunStore(dir) });
    expect(result.meta.end?.cause).toBe("ok");
    expect(existsSync(join(dir, "runs", result.meta.id, ".brim-reserve"))).toBe(false);
    expect(readFileSync(join(dir, "runs", result.meta.id, "output.log"), "utf8")).toBe("1 hi\n");
    expect(tornIn(dir)).toBe(0);
  });
});

describe("the watchdog on its own", () => {
  for (const shell of [false, true]) {
    it(`${shell ? "the /bin/sh variant" : "the Node variant"}: stops the group when its pipe closes without 'done', not after 'done'`, async () => {
      const dir = join(root, `dog-${String(shell)}`);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "run.json"), `${JSON.stringify({ id: "x", end: null })}\n`);
      writeFileSync(join(dir, "timeline.ndjson"), '{"t":1,"kind":"start","pid":1}\n{"t":2,"ki');
      const job = spawn("sh", ["-c", "sleep 60 & sleep 60; wait"], { detached: true, stdio: "ignore" });
      const pgid = job.pid as number;
      await until(() => groupMembers(pgid).length >= 2, 5000);
      const released = Watchdog.start({ runDir: dir, graceS: 0.5, keep: false }, shell);
      released.arm(pgid);
      released.release();
      const dog = Watchdog.start({ runDir: dir, graceS: 0.5, keep: false }, shell);
      dog.arm(pgid);
      await sleep(400);
      expect(groupMembers(pgid).length).toBeGreaterThanOrEqual(2);
      dog.abandon();
      expect(await until(() => groupMembers(pgid).length === 0, 5000)).toBe(true);
      if (!shell) {
        expect(await until(() => (JSON.parse(readFileSync(join(dir, "run.json"), "utf8")) as { end: unknown }).end !== null, 3000)).toBe(true);
        const lines = readFileSync(join(dir, "timeline.ndjson"), "utf8")
          .split("\n")
          .filter((l) => l !== "");
        expect(lines.map((l) => (JSON.parse(l) as { kind: string }).kind)).toEqual(["start", "event", "end"]);
      }
    });
  }
});
