// brim on DeepSpeed's own launcher (`deepspeed --num_gpus 2 …`), 2 CPU ranks: the runner starts
// deepspeed.launcher.launch, which starts the ranks; brim attaches to each through the inherited
// sitecustomize and leaves both launchers inert. The job (test/jobs/deepspeed_engine.py) is a real
// DeepSpeed engine (ZeRO-2, the batch and accumulation in its JSON config); DeepSpeed's CPU accelerator
// talks gloo and JIT-builds its shared-memory op once (g++, ninja: ~30 s the first time on an idle 2-core
// host, minutes on a busy one): .ci/venv builds it, and the set-up here loads it (building it only if
// the cache is not there) before any test's time runs.
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? join(REPO, ".venv", "bin", "python");
const DEEPSPEED = join(dirname(PYTHON), "deepspeed");
const required = process.env.BRIM_REQUIRE_FRAMEWORKS === "1";
// read from the packages' metadata, not imported (DeepSpeed's import costs seconds of CPU): the set-up's
// shm op below imports DeepSpeed and fails there if it is installed but broken
const probe = spawnSync(
  PYTHON,
  ["-c", "import importlib.metadata as m; m.version('deepspeed'); assert int(m.version('torch').split('.')[0]) >= 2, 'torch < 2'"],
  { encoding: "utf8" },
);
const usable = probe.status === 0 && existsSync(DEEPSPEED);
if (!usable && required) throw new Error(`BRIM_REQUIRE_FRAMEWORKS=1 but ${PYTHON} has no deepspeed launcher (bash .ci/venv installs it)`);
const why = usable ? PYTHON : `skipped: ${probe.stderr.trim().split("\n").pop() ?? `no ${DEEPSPEED}`}`;
// two launchers and two ranks of a real engine: room beyond vitest's 60 s
const SLOW = scaled(240_000);

const root = mkdtempSync(join(tmpdir(), "brim-deepspeed-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const freePort = (): string =>
  spawnSync(PYTHON, ["-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"], { encoding: "utf8" }).stdout.trim();

/** A job folder: the engine script and a DeepSpeed config as a user keeps one (global batch 32 = 8 × 2 × 2 ranks, or `micro` × 2 × 2). */
function jobDir(tag: string, micro = 8): string {
  const dir = join(root, tag);
  rmSync(dir, { recursive: true, force: true });
  spawnSync("mkdir", ["-p", dir]);
  copyFileSync(join(REPO, "test", "jobs", "deepspeed_engine.py"), join(dir, "deepspeed_engine.py"));
  writeFileSync(
    join(dir, "ds_config.json"),
    `{
  "train_batch_size": ${micro * 2 * 2},
  "train_micro_batch_size_per_gpu": ${micro},
  "gradient_accumulation_steps": 2,
  "zero_optimization": { "stage": 2 },
  "zero_allow_untested_optimizer": true,
  "steps_per_print": 1000000
}
`,
  );
  return dir;
}

const launch = (): string[] => [DEEPSPEED, "--num_gpus", "2", "--master_port", freePort(), "deepspeed_engine.py", "--deepspeed_config", "ds_config.json"];

interface Meta {
  id: string;
  end: { cause: string; message: string; exit_code: number | null };
  summary: { steps: number; samples: number | null; samples_per_s: number | null; micro_batch: number | null; accumulation: number | null };
  ranks?: { rank: number; pid: number; steps: number; samples_per_s: number | null }[];
}

const outputTail = (dir: string, id: string): string => {
  try {
    return readFileSync(join(dir, ".brim", "runs", id, "output.log"), "utf8").slice(-3000);
  } catch {
    return "(no output.log)";
  }
};

const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !["Z", "X"].includes(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] ?? "");
  } catch {
    return false;
  }
};

describe.skipIf(!usable)(`brim on DeepSpeed's launcher, 2 CPU ranks (${why})`, () => {
  // the shm op every engine loads at its start, built here if the set-up did not (test/jobs/deepspeed_shm_op.py)
  beforeAll(() => {
    const op = spawnSync(PYTHON, [join(REPO, "test", "jobs", "deepspeed_shm_op.py")], { encoding: "utf8", timeout: scaled(600_000) });
    expect(op.status, `${op.stdout}${op.stderr}`.slice(-3000)).toBe(0);
    expect(op.stdout).toMatch(/^deepspeed shm op: /m);
  }, scaled(600_000));

  it(
    "brim run --steps N -- deepspeed …: every rank stops at N optimizer steps, micro-batch and accumulation as the engine runs them, samples/s the ranks' sum",
    () => {
      const dir = jobDir("run");
      const r = spawnSync(process.execPath, [BRIM, "run", "--json", "--steps", "12", "--", ...launch(), "--max-steps", "1000"], {
        cwd: dir,
        encoding: "utf8",
        timeout: scaled(200_000),
      });
      expect(r.stdout, r.stderr.slice(-3000)).toMatch(/^\{/);
      const meta = JSON.parse(r.stdout) as Meta;
      expect(r.status, `${meta.end.message}\n${outputTail(dir, meta.id)}`).toBe(0);
      expect(meta.end.cause).toBe("ok");
      expect(meta.summary.steps).toBe(12);
      expect(meta.summary.micro_batch).toBe(8);
      expect(meta.summary.accumulation).toBe(2);
      // 12 optimizer steps × (8 × 2) samples × 2 ranks
      expect(meta.summary.samples).toBe(12 * 16 * 2);
      const ranks = meta.ranks ?? [];
      expect(ranks.map((x) => [x.rank, x.steps])).toEqual([
        [0, 12],
        [1, 12],
      ]);
      expect(meta.summary.samples_per_s).toBeCloseTo(
        ranks.reduce((n, x) => n + (x.samples_per_s ?? 0), 0),
        6,
      );
      // the runner and deepspeed.launcher.launch load brim's sitecustomize too, and stay silent
      const hellos = readFileSync(join(dir, ".brim", "runs", meta.id, "timeline.ndjson"), "utf8")
        .split("\n")
        .filter((l) => l.includes('"kind":"hello"'))
        .map((l) => JSON.parse(l) as { rank: number | null });
      expect(hellos.map((h) => h.rank).sort()).toEqual([0, 1]);
    },
    SLOW,
  );

  it(
    "brim tune -- deepspeed … --deepspeed_config ds_config.json: the batch knobs are found in DeepSpeed's config, every trial passes DeepSpeed's batch check on both ranks",
    () => {
      // the user's micro-batch 16 and a trial at 8: the smaller one steps at fewer samples/s (the ranks'
      // gloo all-reduce and ZeRO's bookkeeping cost the same whatever the batch), so there is no winner
      // to confirm and the tune is 2 trials of two launchers each, not 6
      const dir = jobDir("tune", 16);
      const r = spawnSync(
        process.execPath,
        [
          BRIM,
          "tune",
          "--json",
          "--free-batch",
          "--strategy",
          "grid",
          "--knob",
          "batch_size=16,8",
          "--fix",
          "accumulation",
          // PyTorch's threads, tried first beside busy cores, would join the grid's trial at 8
          "--fix",
          "cpu_threads",
          "--max-trials",
          "2",
          // at most 6 steps or 2 s measured a trial: what reached DeepSpeed is asserted, not a speed
          "--steps",
          "6",
          "--window",
          "2s",
          "--",
          ...launch(),
          "--max-steps",
          "100000",
        ],
        { cwd: dir, encoding: "utf8", timeout: scaled(220_000) },
      );
      expect(r.stdout, r.stderr.slice(-3000)).toMatch(/^\{/);
      const tune = JSON.parse(r.stdout) as { notes: string[]; trials: { index: number; run_id: string; knobs: Record<string, unknown>; end: string }[] };
      expect(tune.notes).toContain(
        "knobs found: batch_size=16 (ds_config.json: train_micro_batch_size_per_gpu), accumulation=2 (ds_config.json: gradient_accumulation_steps), train_batch_size=64 kept = batch_size × accumulation × 2 ranks (ds_config.json: train_batch_size)",
      );
      const runOf = (id: string | undefined): Meta => JSON.parse(readFileSync(join(dir, ".brim", "runs", id ?? "", "run.json"), "utf8")) as Meta;

      // 8 × 2 × 2 ranks: DeepSpeed refuses to start unless the trial's copy says train_batch_size 32
      const eight = tune.trials.find((t) => t.knobs.batch_size === 8);
      expect(["ok", "slower"], r.stderr.slice(-3000)).toContain(eight?.end);
      const run = runOf(eight?.run_id);
      expect(run.summary.micro_batch).toBe(8);
      expect(run.summary.accumulation).toBe(2);
      // both ranks ran it
      const hellos = readFileSync(join(dir, ".brim", "runs", eight?.run_id ?? "", "timeline.ndjson"), "utf8")
        .split("\n")
        .filter((l) => l.includes('"kind":"hello"'))
        .map((l) => JSON.parse(l) as { rank: number | null });
      expect(hellos.map((h) => h.rank).sort()).toEqual([0, 1]);
      // a trial ended once measured (the user's configuration, trial 0) is an ok run, not "hung"
      const baseline = tune.trials.find((t) => t.index === 0);
      expect(baseline?.end).toBe("ok");
      const first = runOf(baseline?.run_id);
      expect(first.end.cause, first.end.message).toBe("ok");
      expect(first.summary.micro_batch).toBe(16);
      expect(tune.trials.every((t) => t.end === "ok" || t.end === "slower")).toBe(true);
      // the trial copies are gone and the user's config is as it was
      expect(readdirSync(dir).filter((name) => name.includes("brim-trial"))).toEqual([]);
      expect(JSON.parse(readFileSync(join(dir, "ds_config.json"), "utf8"))).toMatchObject({ train_batch_size: 64, train_micro_batch_size_per_gpu: 16 });
    },
    SLOW,
  );

  it(
    "Ctrl-C: brim forwards it through both launchers, exits 130, and no rank is left",
    async () => {
      const dir = jobDir("sigint");
      const child = spawn(process.execPath, [BRIM, "run", "--json", "--", ...launch(), "--max-steps", "100000", "--step-ms", "20"], {
        cwd: dir,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      const timeline = (): string => {
        try {
          const runs = join(dir, ".brim", "runs");
          const id = readdirSync(runs)[0] ?? "";
          return readFileSync(join(runs, id, "timeline.ndjson"), "utf8");
        } catch {
          return "";
        }
      };
      const deadline = Date.now() + scaled(180_000);
      // both ranks stepping: the interrupt lands in the loop, not in start-up
      while (Date.now() < deadline && (timeline().match(/"kind":"step"/g) ?? []).length < 20) await new Promise((r) => setTimeout(r, 250));
      const pids = timeline()
        .split("\n")
        .filter((l) => l.includes('"kind":"hello"'))
        .map((l) => (JSON.parse(l) as { pid: number }).pid);
      expect(pids.length).toBe(2);
      child.kill("SIGINT");
      const code = await new Promise<number | null>((done) => child.on("exit", (c) => done(c)));
      expect(code).toBe(130);
      const meta = JSON.parse(stdout) as Meta;
      expect(meta.end.cause).toBe("interrupted");
      // the ranks end after brim does: wait for them (a hung rank still fails, at the scaled limit)
      const gone = Date.now() + scaled(30_000);
      while (Date.now() < gone && pids.some(alive)) await new Promise((r) => setTimeout(r, 100));
      for (const pid of pids) expect(alive(pid), `rank pid ${pid} still alive`).toBe(false);
    },
    SLOW,
  );
});
