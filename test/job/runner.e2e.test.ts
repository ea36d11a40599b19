import { readdirSync, readFileSync } from "node:fs";
import { createConnection } from "node:net";
import { describe, expect, it } from "vitest";
import { ChannelServer, decodeChannelLine, type ChannelMessage } from "../../src/job/channel.ts";
import { classifyEnd, oomInLine } from "../../src/job/classify.ts";
import { Job, jobEnvironment } from "../../src/job/runner.ts";
import { scaled } from "../helpers/time.ts";

const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";

// Zombies (killed, not yet reaped by a container's init) do not count as alive.
function procStat(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  const fields = procStat(pid);
  return fields !== null && fields[0] !== "Z" && fields[0] !== "X";
}

function groupAlive(pgid: number): boolean {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .some((entry) => {
      const fields = procStat(Number(entry));
      return fields !== null && Number(fields[2]) === pgid && alive(Number(entry));
    });
}

async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + scaled(timeoutMs);
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("classifyEnd", () => {
  const base = { exitCode: 0, signal: null, stoppedBy: null, sdkOomFatal: false, oomLine: null, gpuLost: false } as const;
  it("reads each cause from its evidence", () => {
    expect(classifyEnd(base).cause).toBe("ok");
    expect(classifyEnd({ ...base, exitCode: 3 }).cause).toBe("crashed");
    expect(classifyEnd({ ...base, exitCode: null, signal: "SIGKILL" }).cause).toBe("host_oom");
    expect(classifyEnd({ ...base, exitCode: null, signal: "SIGSEGV" }).cause).toBe("crashed");
    expect(classifyEnd({ ...base, exitCode: 1, oomLine: { kind: "gpu", line: "CUDA out of memory" } }).cause).toBe("gpu_oom");
    expect(classifyEnd({ ...base, exitCode: 1, sdkOomFatal: true }).cause).toBe("gpu_oom");
    expect(classifyEnd({ ...base, exitCode: 1, oomLine: { kind: "host", line: "DefaultCPUAllocator: can't allocate memory" } }).cause).toBe("host_oom");
    expect(classifyEnd({ ...base, exitCode: null, signal: "SIGKILL", stoppedBy: "cap_exceeded", stopDetail: "held 3 GiB" }).cause).toBe("cap_exceeded");
    expect(classifyEnd({ ...base, exitCode: null, signal: "SIGTERM", stoppedBy: "hung" }).cause).toBe("hung");
    expect(classifyEnd({ ...base, exitCode: 130, stoppedBy: "interrupted" }).cause).toBe("interrupted");
    expect(classifyEnd({ ...base, exitCode: 1, gpuLost: true }).cause).toBe("gpu_fault");
  });

  it("does not call a recovered OOM (exit 0) a failure", () => {
    expect(classifyEnd({ ...base, oomLine: { kind: "gpu", line: "CUDA out of memory" } }).cause).toBe("ok");
  });

  it("recognises the frameworks' out-of-memory messages", () => {
    expect(oomInLine("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.22 GiB. GPU 0 has a total capacity of 15.77 GiB")).toBe("gpu");
    expect(oomInLine("RuntimeError: CUDA out of memory. Tried to allocate 36.00 MiB (GPU 0; 7.93 GiB total capacity)")).toBe("gpu");
    expect(oomInLine("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 123 bytes.")).toBe("gpu");
    expect(oomInLine("RuntimeError: [enforce fail at alloc_cpu.cpp:83] . DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes")).toBe(
      "host",
    );
    expect(oomInLine("epoch 3 loss 0.1 (memory 3 GiB)")).toBeNull();
  });
});

describe("channel server", () => {
  it("decodes lines and names what it drops", () => {
    expect(decodeChannelLine('{"v":1,"type":"step","t":1,"pid":2}')).toEqual({ message: { v: 1, type: "step", t: 1, pid: 2 } });
    expect(decodeChannelLine("{")).toEqual({ dropped: "malformed" });
    expect(decodeChannelLine('{"v":2,"type":"step","t":1,"pid":2}')).toEqual({ dropped: "unknown_version" });
    expect(decodeChannelLine('{"v":1,"type":"step","pid":2}')).toEqual({ dropped: "malformed" });
    expect(decodeChannelLine("[1]")).toEqual({ dropped: "malformed" });
  });

  it("serves many clients, counts and drops malformed lines, never crashes", async () => {
    const received: ChannelMessage[] = [];
    const server = await ChannelServer.listen((message) => received.push(message));
    const send = (text: string): Promise<void> =>
      new Promise((resolve) => {
        const socket = createConnection(server.path, () => {
          socket.end(text, () => resolve());
        });
      });
    await Promise.all([
      send('{"v":1,"type":"hello","t":1,"pid":10}\n{"v":1,"type":"step","t":2,"pid":10,"step":0}\n'),
      send('garbage\n{"v":9,"type":"step","t":2,"pid":11}\n{"v":1,"type":"step","t":3,"pid":11,"step":0}'),
      send("\u0000\u0001\n{}\n"),
    ]);
    await until(() => received.length >= 3 && server.stats.malformed >= 3);
    expect(received.map((message) => `${message.pid}:${message.type}`).sort()).toEqual(["10:hello", "10:step", "11:step"]);
    expect(server.stats.connections).toBe(3);
    expect(server.stats.unknownVersion).toBe(1);
    await server.close();
  });
});

describe("Job: real child processes", () => {
  it("gives the job the SDK's environment", () => {
    const env = jobEnvironment(
      { command: ["x"], runId: "r1", knobs: { batch_size: 8 }, stepBudget: 5, gpuCapBytes: 2 ** 30, gpuTotalBytes: 2 ** 32, baseEnv: {} },
      "/tmp/s.sock",
    );
    expect(env.BRIM_CHANNEL).toBe("/tmp/s.sock");
    expect(env.BRIM_KNOBS).toBe('{"batch_size":8}');
    expect(env.BRIM_STEP_BUDGET).toBe("5");
    expect(env.BRIM_MEMORY_CAP_BYTES).toBe(String(2 ** 30));
    expect(env.XLA_PYTHON_CLIENT_MEM_FRACTION).toBe("0.25");
    expect(env.XLA_PYTHON_CLIENT_PREALLOCATE).toBe("false");
    expect(env.PYTHONPATH).toMatch(/python$/);
  });

  it("fails with one line when the command does not exist", async () => {
    await expect(Job.start({ command: ["brim-no-such-command-xyz"], runId: "r" })).rejects.toThrow(
      /cannot start 'brim-no-such-command-xyz': command not found/,
    );
  });

  it("passes output through line by line and classifies a clean exit", async () => {
    const lines: string[] = [];
    const job = await Job.start({
      command: ["sh", "-c", "echo one; echo two >&2; printf three"],
      runId: "r",
      onOutput: (stream, line) => lines.push(`${stream}:${line}`),
    });
    const result = await job.wait();
    expect(result.end.cause).toBe("ok");
    expect(result.end.exit_code).toBe(0);
    expect(lines.sort()).toEqual(["1:one", "1:three", "2:two"]);
  });

  it("forwards SIGINT to the whole process group and leaves no process behind", async () => {
    let pids: number[] = [];
    const job = await Job.start({
      command: ["sh", "-c", "sleep 60 & echo $!; sleep 60 & echo $!; wait"],
      runId: "r",
      onOutput: (_stream, line) => pids.push(Number(line)),
    });
    await until(() => pids.length === 2);
    pids = [...pids];
    expect(pids.every(alive)).toBe(true);
    job.interrupt("SIGINT");
    const result = await job.wait();
    expect(result.end.cause).toBe("interrupted");
    expect(pids.some(alive)).toBe(false);
    expect(groupAlive(job.pid)).toBe(false);
  });

  it("escalates to SIGKILL when the job ignores the signal", async () => {
    const job = await Job.start({ command: ["sh", "-c", "trap '' INT TERM; echo ready; sleep 60"], runId: "r", killGraceS: 0.5, onOutput: () => {} });
    await new Promise((resolve) => setTimeout(resolve, 300));
    job.interrupt("SIGTERM");
    const result = await job.wait();
    expect(result.end.signal).toBe("SIGKILL");
    expect(result.end.cause).toBe("interrupted");
    expect(groupAlive(job.pid)).toBe(false);
  });

  it("kills what the job left running in its group after it exits", async () => {
    const pids: number[] = [];
    const job = await Job.start({ command: ["sh", "-c", "sleep 60 & echo $!; exit 0"], runId: "r", onOutput: (_s, line) => pids.push(Number(line)) });
    const result = await job.wait();
    expect(result.end.cause).toBe("ok");
    expect(pids).toHaveLength(1);
    await until(() => !alive(pids[0] as number), 3000);
  });

  it("calls a job killed by SIGKILL from outside host-OOM", async () => {
    const job = await Job.start({ command: ["sh", "-c", "kill -9 $$"], runId: "r" });
    const result = await job.wait();
    expect(result.end.signal).toBe("SIGKILL");
    expect(result.end.cause).toBe("host_oom");
    expect(result.end.message).toMatch(/out-of-memory killer/);
  });

  it("calls a PyTorch out-of-memory message on stderr GPU-OOM", async () => {
    const script =
      "import sys; sys.stderr.write('Traceback...\\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 15.77 GiB\\n'); sys.exit(1)";
    const job = await Job.start({ command: [PYTHON, "-c", script], runId: "r" });
    const result = await job.wait();
    expect(result.end.cause).toBe("gpu_oom");
    expect(result.end.message).toMatch(/Tried to allocate 2\.00 GiB/);
    expect(result.tail.at(-1)).toMatch(/OutOfMemoryError/);
  });

  it("receives the SDK's messages and calls a job that stops stepping hung", async () => {
    const script = [
      "import time, brim",
      "for _ in brim.track(range(3), samples=4):",
      "    time.sleep(0.01)",
      "print('stuck', flush=True)",
      "time.sleep(60)",
    ].join("\n");
    const messages: ChannelMessage[] = [];
    const job = await Job.start({
      command: [PYTHON, "-c", script],
      runId: "r-hung",
      hungAfterS: 1,
      killGraceS: 1,
      onMessage: (message) => messages.push(message),
    });
    const result = await job.wait();
    expect(result.end.cause).toBe("hung");
    expect(result.end.message).toMatch(/no training step for \d+ s/);
    expect(messages.find((message) => message.type === "hello")?.run_id).toBe("r-hung");
    expect(messages.filter((message) => message.type === "step")).toHaveLength(3);
    expect(groupAlive(job.pid)).toBe(false);
  });

  it("tells the SDK to stop: the job ends on its own at the next step", async () => {
    const script = [
      "import time, brim",
      "for _ in brim.track(range(100000), samples=1):",
      "    time.sleep(0.01)",
      "print('stopped', brim.stop_reason(), flush=True)",
    ].join("\n");
    const lines: string[] = [];
    const box: { job?: Job } = {};
    let asked = false;
    const job = await Job.start({
      command: [PYTHON, "-c", script],
      runId: "r",
      onOutput: (_s, line) => lines.push(line),
      onMessage: (message) => {
        if (message.type === "step" && message.step === 5 && !asked && box.job) {
          asked = true;
          box.job.requestStop("test");
        }
      },
    });
    box.job = job;
    const result = await job.wait();
    expect(result.end.cause).toBe("ok");
    expect(lines).toContain("stopped server");
    expect(result.steps).toBeLessThan(50);
  });
});
