// brim on real launchers with 2 CPU ranks (gloo): torchrun and accelerate launch start the ranks,
// brim attaches to each through the inherited sitecustomize. One job (test/jobs/ddp_ranks.py) made
// to straggle (rank 1 sleeps before backward) or to hang (rank 1 sleeps before an all-reduce).
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const JOBS = join(REPO, "test", "jobs");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
// read from the packages' metadata, not imported (torch and accelerate cost seconds of CPU to import)
const probe = spawnSync(
  PYTHON,
  ["-c", "import importlib.metadata as m; m.version('accelerate'); assert int(m.version('torch').split('.')[0]) >= 2, 'torch < 2'"],
  { encoding: "utf8" },
);
const usable = probe.status === 0;
const ACCELERATE = join(dirname(PYTHON), "accelerate");
// accelerate's rendezvous port defaults to a fixed 29500: a free one, so no other job on the host can hold it
const freePort = (): string =>
  spawnSync(PYTHON, ["-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"], { encoding: "utf8" }).stdout.trim();
const ACCELERATE_LAUNCH = existsSync(ACCELERATE)
  ? [ACCELERATE, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
  : [
      PYTHON,
      "-m",
      "accelerate.commands.launch",
      "--multi_gpu",
      "--num_processes",
      "2",
      "--num_machines",
      "1",
      "--mixed_precision",
      "no",
      "--dynamo_backend",
      "no",
    ];
const TORCHRUN = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"];
// a loaded 2-core CI host starts two ranks slowly: room beyond vitest's 60 s
const SLOW = scaled(150_000);
const root = mkdtempSync(join(tmpdir(), "brim-multi-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Rank {
  rank: number;
  pid: number;
  steps: number;
  samples_per_s: number | null;
  step_time_s: number | null;
  own_time_s: number | null;
  wait_time_s: number | null;
}
interface Meta {
  id: string;
  end: { cause: string; message: string; exit_code: number | null };
  summary: { steps: number; samples_per_s: number | null };
  ranks?: Rank[];
}

function brim(tag: string, args: string[], command: string[]): { status: number | null; meta: Meta; store: string; stderr: string } {
  const store = join(root, tag);
  const r = spawnSync(process.execPath, [BRIM, "run", "--json", "--store", store, ...args, "--", ...command], {
    cwd: JOBS,
    encoding: "utf8",
    timeout: scaled(180_000),
  });
  expect(r.stdout, r.stderr.slice(-3000)).toMatch(/^\{/);
  return { status: r.status, meta: JSON.parse(r.stdout) as Meta, store, stderr: r.stderr };
}

const outputTail = (store: string, id: string): string => {
  try {
    return readFileSync(join(store, "runs", id, "output.log"), "utf8").slice(-3000);
  } catch {
    return "(no output.log)";
  }
};

function doctor(store: string, id: string): { findings: { id: string; title: string; summary: string }[] } {
  const r = spawnSync(process.execPath, [BRIM, "doctor", "--json", "--store", store, id], { encoding: "utf8" });
  return JSON.parse(r.stdout) as { findings: { id: string; title: string; summary: string }[] };
}

const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !["Z", "X"].includes(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] ?? "");
  } catch {
    return false;
  }
};

describe.skipIf(!usable)(`brim on launchers, 2 CPU ranks (${usable ? PYTHON : `skipped: ${probe.stderr.trim().split("\n").pop()}`})`, () => {
  // accelerate launch drives torch.distributed.run: the same ranks and environment as torchrun's
  it(
    "accelerate launch: the step budget stops every rank at N, samples/s is the ranks' sum, per-rank figures show the straggler",
    () => {
      const { status, meta, store } = brim(
        "straggler",
        ["--steps", "20", "--warmup", "3"],
        [...ACCELERATE_LAUNCH, "--main_process_port", freePort(), "ddp_ranks.py", "--slow-rank", "1", "--slow-ms", "30", "--max-steps", "1000"],
      );
      expect(status, `${meta.end.message}\n${outputTail(store, meta.id)}`).toBe(0);
      expect(meta.summary.steps).toBe(20);
      const ranks = meta.ranks ?? [];
      expect(ranks.map((r) => [r.rank, r.steps])).toEqual([
        [0, 20],
        [1, 20],
      ]);
      expect(meta.summary.samples_per_s).toBeCloseTo(
        ranks.reduce((n, r) => n + (r.samples_per_s ?? 0), 0),
        6,
      );
      for (const r of ranks) expect(r.step_time_s).toBeGreaterThan(0.03);
      // rank 1's 30 ms sleep is its own work; rank 0 waits for it inside backward (the all-reduce)
      const [r0, r1] = ranks as [Rank, Rank];
      expect((r1.own_time_s ?? 0) - (r0.own_time_s ?? 0), JSON.stringify(ranks)).toBeGreaterThan(0.02);
      const f = doctor(store, meta.id).findings.find((x) => x.id === "ranks");
      expect(f?.title).toBe("Straggler: rank 1 is slower; the others wait for it");
      // the launchers (accelerate, then torchrun's agent) load brim's sitecustomize too, and stay silent
      const hellos = readFileSync(join(store, "runs", meta.id, "timeline.ndjson"), "utf8")
        .split("\n")
        .filter((l) => l.includes('"kind":"hello"'))
        .map((l) => JSON.parse(l) as { rank: number | null });
      expect(hellos.map((h) => h.rank).sort()).toEqual([0, 1]);
    },
    SLOW,
  );

  it(
    "two simulated nodes (torchrun --nnodes 2 on 127.0.0.1, world 4): one brim per node, each stops its ranks at N, and the sum of their /metrics is the job's global rate",
    async () => {
      const endpoint = `127.0.0.1:${freePort()}`;
      const ports = [freePort(), freePort()];
      const nodes = ports.map((port, node) => {
        const store = join(root, `two-nodes-${node}`);
        const child = spawn(
          process.execPath,
          [
            BRIM,
            "run",
            "--json",
            "--store",
            store,
            "--steps",
            "20",
            "--warmup",
            "3",
            "--name",
            "two-nodes",
            "--prometheus",
            port,
            "--prometheus-grace",
            "30",
            "--",
            PYTHON,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--nproc_per_node",
            "2",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            endpoint,
            "--rdzv-id",
            "brim-two-nodes",
            "ddp_ranks.py",
            "--max-steps",
            "1000",
          ],
          { cwd: JOBS, stdio: ["ignore", "pipe", "pipe"] },
        );
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
        child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
        const exit = new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => child.on("exit", (code) => done({ code, stdout, stderr })));
        return { child, exit, port };
      });
      try {
        // what each brim serves once its job has ended (it keeps serving through the grace)
        const metric = (body: string, name: string): { value: number; labels: string } | null => {
          const line = body.split("\n").find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
          if (line === undefined) return null;
          return { value: Number(line.slice(line.lastIndexOf(" ") + 1)), labels: line.slice(name.length, line.lastIndexOf(" ")) };
        };
        const served: { value: number; labels: string }[] = [];
        for (const { port } of nodes) {
          const deadline = Date.now() + scaled(120_000);
          for (;;) {
            const body = await fetch(`http://127.0.0.1:${port}/metrics`)
              .then((r) => r.text())
              .catch(() => "");
            const steps = metric(body, "brim_steps_total");
            const rate = metric(body, "brim_samples_per_second");
            const ended = metric(body, "brim_job_running");
            if (steps !== null && steps.value >= 20 && rate !== null && Number.isFinite(rate.value) && ended?.value === 0) {
              served.push(rate);
              break;
            }
            expect(Date.now() < deadline, `node on port ${port} never served 20 steps`).toBe(true);
            await new Promise((r) => setTimeout(r, 200));
          }
        }
        for (const { child } of nodes) child.kill("SIGINT");
        const ends = await Promise.all(nodes.map((n) => n.exit));
        const metas = ends.map((e) => {
          expect(e.stdout, e.stderr.slice(-3000)).toMatch(/^\{/);
          return JSON.parse(e.stdout) as Meta;
        });
        // the c10d rendezvous decides which agent is node 0: each brim's ranks say which it got
        const nodeOf = metas.map((m) => Math.floor((m.ranks?.[0]?.rank ?? -2) / 2));
        expect([...nodeOf].sort()).toEqual([0, 1]);
        for (const [i, meta] of metas.entries()) {
          const node = nodeOf[i] as number;
          expect(meta.end.cause, meta.end.message).toBe("ok");
          expect(meta.summary.steps).toBe(20);
          // each brim found its node's two ranks, and each rank stopped at the budget
          expect((meta.ranks ?? []).map((r) => [r.rank, r.steps])).toEqual([
            [2 * node, 20],
            [2 * node + 1, 20],
          ]);
          // torchrun's c10d rendezvous gives the node index to the ranks only: brim labels its series with it
          expect(served[i]?.labels).toContain(`node="${node}"`);
          expect(served[i]?.labels).toContain('job="two-nodes"');
        }
        // the job's global rate: the sum over its four ranks (run.json, all steady steps), which the two
        // brims' /metrics add up to; the gauge reads the last steady steps, so the windows differ (10 % seen
        // on a loaded 2-core host): the bound checks that each node serves its two ranks, not one
        const global = metas.flatMap((m) => m.ranks ?? []).reduce((n, r) => n + (r.samples_per_s ?? 0), 0);
        expect(metas.reduce((n, m) => n + (m.summary.samples_per_s ?? 0), 0)).toBeCloseTo(global, 6);
        const sum = (served[0]?.value ?? 0) + (served[1]?.value ?? 0);
        expect(Math.abs(sum / global - 1), `served ${served.map((x) => x.value).join(" + ")} against the ranks' ${global}`).toBeLessThan(0.3);
      } finally {
        for (const { child } of nodes) if (child.exitCode === null) child.kill("SIGKILL");
      }
    },
    SLOW,
  );

  it(
    "torchrun: a rank that never joins the all-reduce: all ranks stalled, every rank's stacks, the ranks ended",
    () => {
      const { status, meta, store } = brim(
        "hang",
        ["--hang-after", "4", "--grace", "2"],
        [...TORCHRUN, "ddp_ranks.py", "--stall-rank", "1", "--stall-at", "5", "--max-steps", "1000"],
      );
      expect(meta.end.cause, meta.end.message).toBe("hung");
      expect(status).not.toBe(0);
      expect(meta.end.message).toMatch(/^all 2 ranks stalled: no training step on any rank for \d+ s \(limit 4 s\); rank 0 at step 5, rank 1 at step 5/);
      const dir = join(store, "runs", meta.id, "stacks");
      const pids = (meta.ranks ?? []).map((r) => r.pid);
      expect(pids).toHaveLength(2);
      expect(readdirSync(dir).sort()).toEqual(pids.map((pid) => `stacks-${pid}.txt`).sort());
      const stacks = pids.map((pid) => readFileSync(join(dir, `stacks-${pid}.txt`), "utf8"));
      expect(stacks[1]).toMatch(/File ".*ddp_ranks\.py", line \d+ in <module>/);
      expect(stacks[0]).toMatch(/backward/);
      for (const pid of pids) expect(alive(pid), `rank pid ${pid} left running`).toBe(false);
      const f = doctor(store, meta.id).findings.find((x) => x.id === "ranks");
      expect(f?.title).toBe("Collective hang: all ranks stalled");
      expect(f?.summary).toMatch(/Rank 1 was elsewhere \(File ".*ddp_ranks\.py"/);
    },
    SLOW,
  );

  it(
    "torchrun --max-restarts 1: the rank that runs out of memory exits with brim's code, every rank of round 2 runs the smaller micro-batch",
    () => {
      const store = join(root, "oom");
      const command = [...TORCHRUN, "--max-restarts", "1", "ddp_oom.py", "--max-steps", "4"];
      const r = spawnSync(process.execPath, [BRIM, "run", "--json", "--store", store, "--knob", "batch_size=32", "--", ...command], {
        cwd: JOBS,
        encoding: "utf8",
        timeout: scaled(180_000),
        // gloo cannot re-connect its ranks through the agent's shared store after a restart (docs/attach.md)
        env: { ...process.env, TORCH_DISABLE_SHARE_RDZV_TCP_STORE: "1" },
      });
      const meta = JSON.parse(r.stdout) as Meta;
      expect(meta.end.cause, meta.end.message).toBe("ok");
      const dir = join(store, "runs", meta.id);
      expect(JSON.parse(readFileSync(join(dir, "knobs.json"), "utf8"))).toEqual({ batch_size: 16, accumulation: 2 });
      const output = readFileSync(join(dir, "output.log"), "utf8");
      expect(output).toMatch(/exitcode\s*: 75/);
      for (const rank of [0, 1]) {
        expect(output).toContain(`rank ${rank} round 0 micro-batch 32 accumulation 1`);
        expect(output).toContain(`rank ${rank} round 1 micro-batch 16 accumulation 2`);
        expect(output).toContain(`rank ${rank} done: 4 steps of 16 x 2`);
      }
      const events = readFileSync(join(dir, "timeline.ndjson"), "utf8")
        .split("\n")
        .filter((l) => l.includes('"oom_restart_planned"'));
      expect(events).toHaveLength(1);
      // the summary is the last round's: its ranks' own steps
      expect(meta.summary.steps).toBe(4);
      expect((meta.ranks ?? []).map((x) => x.steps)).toEqual([4, 4]);
    },
    SLOW,
  );

  it(
    "brim tune -- torchrun …: every trial runs through the launcher with both ranks, the knob in argv reaches each, one decision for all",
    () => {
      const store = join(root, "tune-ddp");
      const r = spawnSync(
        process.execPath,
        [
          BRIM,
          "tune",
          "--store",
          store,
          // the grid over the given batch and an eighth of it: its ranks step at fewer samples/s (gloo's
          // all-reduce costs the same whatever the batch), further below than a busy machine's noise
          // reaches, so no winner to confirm and 2 trials of three processes each, not 6
          "--strategy",
          "grid",
          "--knob",
          "batch_size=16,2",
          "--max-trials",
          "2",
          "--steps",
          "6",
          "--window",
          "2s",
          "--fix",
          "num_workers",
          // PyTorch's threads, tried first beside busy cores, would join the grid's trial at 2
          "--fix",
          "cpu_threads",
          "--",
          ...TORCHRUN,
          "ddp_loop.py",
          "--batch-size",
          "16",
          "--max-steps",
          "100000",
        ],
        { cwd: JOBS, encoding: "utf8", timeout: scaled(400_000), env: { ...process.env, NO_COLOR: "1" } },
      );
      expect(r.status, r.stderr.slice(-3000)).toBe(0);
      expect(r.stderr).toContain("knobs found: batch_size (command line: --batch-size 16)");
      const [id] = readdirSync(join(store, "tunes"));
      const record = JSON.parse(readFileSync(join(store, "tunes", id as string, "tune.json"), "utf8")) as {
        trials: { knobs: Record<string, unknown>; end: string; run_id: string | null; samples_per_step?: number | null }[];
      };
      // measured to the end, or stopped as slower once measured: each ran both ranks on its batch
      const ok = record.trials.filter((t) => (t.end === "ok" || t.end === "slower") && t.run_id !== null);
      expect(new Set(ok.map((t) => t.knobs.batch_size)).size).toBe(2);
      for (const t of ok) {
        // both ranks attached in every trial, and each stepped on the trial's batch (a rank's samples per step)
        const hellos = readFileSync(join(store, "runs", t.run_id as string, "timeline.ndjson"), "utf8")
          .split("\n")
          .filter((l) => l.includes('"kind":"hello"'))
          .map((l) => JSON.parse(l) as { rank: number | null });
        expect(hellos.map((h) => h.rank).sort()).toEqual([0, 1]);
        const output = readFileSync(join(store, "runs", t.run_id as string, "output.log"), "utf8");
        expect(output).toMatch(/rank 0 step \d+/);
        expect(output).toMatch(/rank 1 step \d+/);
        expect(t.samples_per_step).toBe(t.knobs.batch_size);
      }
    },
    scaled(400_000),
  );
});
