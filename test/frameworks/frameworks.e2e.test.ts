import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus, platform, release, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { descendants, frameworkPython, type FrameworkPython } from "./venv.ts";
import { scaled } from "../helpers/time.ts";

// The real frameworks users train with (Lightning, the Hugging Face Trainer, accelerate,
// torch.compile, torchrun, JAX + optax), each running an unmodified job of test/jobs/fw_*.py under
// the built CLI, as a user runs it. Each case checks the step budget, the samples per step, brim's
// samples/s against the job's own printed figure, the precision brim reports, and that Ctrl-C ends
// everything with exit 130 (once for each interrupt path: see ctrlCAs). The outcomes go to a record that scripts/frameworks-table.mjs renders
// as docs/frameworks.md.
const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const RECORD = process.env.BRIM_FRAMEWORKS_RECORD ?? join(REPO, "bench", "results", "local", "frameworks.json");
const STEPS = 20;
const WARMUP = 5; // the jobs' Meter measures from the end of step 5, as brim does with --warmup 5
const RATE_TOLERANCE = 0.15;

const py: FrameworkPython = frameworkPython(REPO);
const root = mkdtempSync(join(tmpdir(), "brim-frameworks-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

type Check = "step_budget" | "samples_per_step" | "samples_per_s" | "precision" | "ctrl_c";
interface Outcome {
  pass: boolean | null;
  detail: string;
}
interface Case {
  name: string;
  framework: keyof FrameworkPython["versions"];
  script: string;
  args: string[];
  launcher?: string[];
  steps?: number;
  /** samples per optimizer step (micro-batch × accumulation) on each rank; null: brim cannot know */
  samplesPerStep: number | null;
  microBatch: number | null;
  accumulation: number | null;
  precision: string | null;
  ranks?: number;
  /**
   * the case whose Ctrl-C test covers this one's: the same interrupt path, in brim (src/job/runner.ts:
   * SIGINT to the job's process group, SIGKILL after the grace; the same for every job) and in the job
   * (no handler of the framework's own, no process of its own beside the one brim started)
   */
  ctrlCAs?: string;
}

const TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"];
const CASES: Case[] = [
  {
    name: "Lightning Trainer (32-true)",
    framework: "lightning",
    script: "fw_lightning.py",
    args: ["--precision", "32-true"],
    samplesPerStep: 32,
    microBatch: 16,
    accumulation: 2,
    precision: "fp32",
  },
  {
    name: "Lightning Trainer (bf16-mixed)",
    framework: "lightning",
    script: "fw_lightning.py",
    args: ["--precision", "bf16-mixed"],
    samplesPerStep: 32,
    microBatch: 16,
    accumulation: 2,
    precision: "bf16-mixed",
    ctrlCAs: "Lightning Trainer (32-true)",
  },
  {
    name: "Hugging Face Trainer",
    framework: "transformers",
    script: "fw_hf_trainer.py",
    args: [],
    samplesPerStep: 16,
    microBatch: 8,
    accumulation: 2,
    precision: "fp32",
    // the Trainer installs no SIGINT handler (only a SIGTERM one, and only with its opt-in JIT
    // checkpoint) and starts no process with 0 loader workers: Python's KeyboardInterrupt ends it, as
    // it ends the accelerate loop
    ctrlCAs: "accelerate Accelerator (bf16, accumulation 4)",
  },
  {
    name: "accelerate Accelerator (bf16, accumulation 4)",
    framework: "accelerate",
    script: "fw_accelerate.py",
    args: [],
    samplesPerStep: 64,
    microBatch: 16,
    accumulation: 4,
    precision: "bf16-mixed",
  },
  { name: "torch.compile", framework: "torch", script: "fw_compile.py", args: [], samplesPerStep: 32, microBatch: 32, accumulation: 1, precision: "fp32" },
  {
    name: "torchrun DDP (gloo, 2 ranks)",
    framework: "torch",
    script: "fw_torchrun.py",
    args: [],
    launcher: TORCHRUN,
    samplesPerStep: 32,
    microBatch: 32,
    accumulation: 1,
    precision: "fp32",
    ranks: 2,
  },
  {
    name: "JAX + optax (the jitted train_step)",
    framework: "jax",
    script: "fw_jax.py",
    args: ["--max-steps", "100000"],
    // ~1 ms steps that JAX dispatches up to 4 ahead: 30 steps (40 ms) would be measured to ±4 steps' edge
    steps: 300,
    samplesPerStep: 256,
    microBatch: 256,
    accumulation: 1,
    precision: null,
    // one process, no SIGINT handler of JAX's, optax's or brim's attach (python/brim): Python's
    // KeyboardInterrupt ends it, as it ends the accelerate loop
    ctrlCAs: "accelerate Accelerator (bf16, accumulation 4)",
  },
];

const results = new Map<string, { case: Case; checks: Partial<Record<Check, Outcome>> }>();
function note(c: Case, check: Check, pass: boolean | null, detail: string): void {
  const entry = results.get(c.name) ?? { case: c, checks: {} };
  entry.checks[check] = { pass, detail };
  results.set(c.name, entry);
}

afterAll(() => {
  if (!py.available || results.size === 0) return;
  const record = {
    schema: "brim.frameworks/v1",
    generated_at: new Date().toISOString(),
    commit: spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: REPO, encoding: "utf8" }).stdout.trim() || null,
    command: "npx vitest run test/frameworks (part of npm test and .ci/run)",
    machine: { cpu: cpus()[0]?.model ?? null, cpus: cpus().length, platform: `${platform()} ${release()}`, node: process.version, gpu: null },
    python: py.version,
    versions: py.versions,
    cases: [...results.values()].map(({ case: c, checks }) => ({
      name: c.name,
      framework: c.framework,
      version: py.versions[c.framework],
      checks,
    })),
  };
  mkdirSync(dirname(RECORD), { recursive: true });
  writeFileSync(RECORD, `${JSON.stringify(record, null, 2)}\n`);
});

function command(c: Case, jobArgs: string[]): string[] {
  return [py.path, ...(c.launcher ?? []), join(REPO, "test", "jobs", c.script), ...c.args, ...jobArgs];
}

interface BudgetRun {
  status: number | null;
  meta: {
    id: string;
    end: { cause: string } | null;
    summary: {
      steps: number;
      steady_steps: number;
      samples: number;
      steady_samples: number;
      samples_per_s: number | null;
      step_time_s: number | null;
      micro_batch: number | null;
      accumulation: number | null;
    };
    ranks?: { rank: number; steps: number; samples_per_s: number | null }[];
  };
  output: string;
  stderr: string;
  store: string;
}

function budgetRun(c: Case, tag: string): BudgetRun {
  const store = join(root, tag);
  const r = spawnSync(
    process.execPath,
    [BRIM, "run", "--json", "--store", store, "--steps", String(c.steps ?? STEPS), "--warmup", String(WARMUP), "--", ...command(c, [])],
    {
      encoding: "utf8",
      timeout: scaled(300_000),
    },
  );
  const meta = JSON.parse(r.stdout) as BudgetRun["meta"];
  return { status: r.status, meta, output: readFileSync(join(store, "runs", meta.id, "output.log"), "utf8"), stderr: r.stderr, store };
}

/** The job's own last printed rate, per rank label ("" without ranks). */
function jobRates(output: string): Map<string, number> {
  const rates = new Map<string, number>();
  for (const m of output.matchAll(/fw-rate(?<rank> rank \d+)? step (?<step>\d+) (?<rate>[\d.]+) samples\/s/g))
    rates.set(m.groups?.rank ?? "", Number(m.groups?.rate));
  return rates;
}

const within = (a: number, b: number): boolean => Math.abs(a - b) / b <= RATE_TOLERANCE;
const pct = (a: number, b: number): string => `${((a / b - 1) * 100).toFixed(1)} %`;

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim().slice(0, 120);
  } catch {
    return "?";
  }
}

async function ctrlC(c: Case, tag: string): Promise<{ code: number | null; left: string[]; tree: number[] }> {
  const pidDir = join(root, `${tag}-pids`);
  mkdirSync(pidDir);
  const child = spawn(process.execPath, [BRIM, "run", "--quiet", "--store", join(root, tag), "--", ...command(c, [])], {
    env: { ...process.env, FW_PID_DIR: pidDir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (out += d.toString()));
  const closed = new Promise<number | null>((done) => child.on("close", (code) => done(code)));
  const ready = (): boolean => (c.framework === "jax" ? /step \d+\/\d+/.test(out) : readdirSync(pidDir).length >= (c.ranks ?? 1));
  const deadline = Date.now() + scaled(240_000);
  while (!ready() && Date.now() < deadline && child.exitCode === null) await new Promise((r) => setTimeout(r, 100));
  expect(ready(), `the job never reached its first step:\n${out.slice(-2000)}`).toBe(true);
  const tree = descendants(child.pid as number);
  const names = new Map(tree.map((pid) => [pid, commandOf(pid)]));
  child.kill("SIGINT");
  const code = await closed;
  const alive = (pid: number): boolean => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
      return state !== "Z" && state !== "X";
    } catch {
      return false;
    }
  };
  // brim's own watchdog (src/guard/watchdog.ts) ends when brim's pipe closes, a moment after brim:
  // give the tree a second; what still runs then was left behind
  for (let waited = 0; waited < 1000 && tree.some(alive); waited += 50) await new Promise((r) => setTimeout(r, 50));
  const left = tree.filter(alive).map((pid) => `${pid} ${names.get(pid) ?? "?"}`);
  return { code, left, tree };
}

describe.skipIf(!py.available)(`real frameworks (${py.available ? py.summary : "skipped"})`, () => {
  for (const c of CASES) {
    it(
      `${c.name}: step budget, samples per step, samples/s against the job's own, precision`,
      () => {
        const run = budgetRun(c, c.script.replace(/\W/g, "-") + c.args.join("-"));
        const { summary } = run.meta;
        const why = `${run.stderr}\n${run.output.slice(-3000)}`;
        expect(run.status, why).toBe(0);
        expect(run.meta.end?.cause).toBe("ok");

        // the step budget: optimizer steps, once per job whatever the number of ranks
        const budget = c.steps ?? STEPS;
        if (c.framework === "jax") {
          // the attach counts the jitted function that takes a gradient (python/brim/_jax_attach.py): an exact stop
          const printed = Math.max(...[...run.output.matchAll(/step (\d+)\/\d+/g)].map((m) => Number(m[1])));
          note(c, "step_budget", summary.steps === budget, `--steps ${budget}: brim counted ${summary.steps} (the job printed up to step ${printed})`);
          expect(summary.steps).toBe(budget);
          expect(printed).toBeLessThanOrEqual(budget);
        } else {
          note(
            c,
            "step_budget",
            summary.steps === budget,
            `${summary.steps} steps for --steps ${budget}${c.ranks ? ` (${c.ranks} ranks, each ${run.meta.ranks?.map((r) => r.steps).join("/")})` : ""}`,
          );
          expect(summary.steps).toBe(budget);
          if (c.ranks) expect(run.meta.ranks?.map((r) => r.steps)).toEqual(Array<number>(c.ranks).fill(budget));
        }

        // samples per step: micro-batch × accumulation, as the job configured them
        if (c.samplesPerStep === null) {
          note(c, "samples_per_step", null, "not measurable: a JAX job's progress lines print no batch size");
        } else {
          const perStep = summary.steady_samples / summary.steady_steps / (c.ranks ?? 1);
          const ok = summary.micro_batch === c.microBatch && summary.accumulation === c.accumulation && perStep === c.samplesPerStep;
          note(
            c,
            "samples_per_step",
            ok,
            `${summary.micro_batch} × ${summary.accumulation} = ${perStep} per step${c.ranks ? " per rank" : ""} (job: ${c.samplesPerStep})`,
          );
          expect([summary.micro_batch, summary.accumulation, perStep]).toEqual([c.microBatch, c.accumulation, c.samplesPerStep]);
        }

        // throughput against the job's own figure over the same steps
        if (c.framework === "jax") {
          const printed = [...run.output.matchAll(/step (\d+)\/\d+ loss \S+ ([\d.]+) it\/s/g)].filter((m) => Number(m[1]) > WARMUP).map((m) => Number(m[2]));
          // the job's own rate over the steps brim measured (its windows of 5 after the warm-up): steps ÷ their time
          const job = printed.length / printed.reduce((a, r) => a + 1 / r, 0);
          // steps/s from brim's samples/s over its steady steps: JAX dispatches ahead, so single step times
          // bunch up where the job waits for its loss every 5 steps, while their sum holds
          const brim = (summary.samples_per_s as number) / (c.microBatch as number);
          note(
            c,
            "samples_per_s",
            within(brim, job),
            `steps/s ${brim.toFixed(1)} (samples/s ÷ ${c.microBatch}) vs the job's ${job.toFixed(1)} it/s over the same steps (${pct(brim, job)})`,
          );
          expect(within(brim, job)).toBe(true);
        } else {
          const rates = jobRates(run.output);
          const job = [...rates.values()].reduce((a, b) => a + b, 0);
          const brim = summary.samples_per_s as number;
          const perRank = c.ranks
            ? `; per rank ${run.meta.ranks?.map((r) => `${r.samples_per_s?.toFixed(0)} vs ${rates.get(` rank ${r.rank}`)?.toFixed(0)}`).join(", ")}`
            : "";
          note(
            c,
            "samples_per_s",
            within(brim, job),
            `${brim.toFixed(0)} vs the job's ${job.toFixed(0)} samples/s (${pct(brim, job)})${c.ranks ? ", summed over ranks" : ""}${perRank}`,
          );
          expect(rates.size, why).toBe(c.ranks ?? 1);
          expect(brim / job).toBeGreaterThan(1 - RATE_TOLERANCE);
          expect(brim / job).toBeLessThan(1 + RATE_TOLERANCE);
          for (const r of run.meta.ranks ?? []) expect(within(r.samples_per_s as number, rates.get(` rank ${r.rank}`) as number)).toBe(true);
        }

        // the precision brim reports (brim doctor, through the CLI)
        const doctor = spawnSync(process.execPath, [BRIM, "doctor", "--json", "--store", run.store, run.meta.id], { encoding: "utf8" });
        const report = JSON.parse(doctor.stdout) as { measures: { precision: string | null }; findings: { id: string }[] };
        if (c.precision === null) note(c, "precision", null, "not measurable: JAX reports no precision to brim");
        else note(c, "precision", report.measures.precision === c.precision, `${report.measures.precision ?? "?"} (job: ${c.precision})`);
        expect(report.measures.precision).toBe(c.precision);
        if (c.script === "fw_compile.py") expect(report.findings.map((f) => f.id)).toContain("slow_steps");
        if (c.ctrlCAs !== undefined) note(c, "ctrl_c", null, `not run again: the same interrupt path as ${c.ctrlCAs}, whose Ctrl-C test covers it`);
      },
      scaled(360_000),
    );

    // a job process costs 5-15 s of CPU: a Ctrl-C on the same interrupt path as another case's adds nothing.
    // Run on: Lightning (its own KeyboardInterrupt handler: SIG_IGN, teardown, exit 1), torch.compile
    // (inductor's compile workers, processes of the job's own), torchrun (a launcher and its ranks), and
    // accelerate for the jobs that Python's own KeyboardInterrupt ends
    if (c.ctrlCAs === undefined)
      it(
        `${c.name}: Ctrl-C ends brim with exit 130 and leaves no process behind`,
        async () => {
          const { code, left, tree } = await ctrlC(c, `${c.script.replace(/\W/g, "-")}${c.args.join("-")}-int`);
          note(
            c,
            "ctrl_c",
            code === 130 && left.length === 0,
            `exit ${code}; ${tree.length} processes, ${left.length} left${left.length > 0 ? `: ${left.join("; ")}` : ""}`,
          );
          expect(code).toBe(130);
          expect(left).toEqual([]);
        },
        scaled(360_000),
      );
  }
});

describe("the framework venv", () => {
  it("is there in CI (BRIM_REQUIRE_FRAMEWORKS=1), else the tests above say why they skip", () => {
    if (!py.available) {
      console.warn(`brim: framework tests skipped: ${py.reason} (bash .ci/venv makes the venv)`);
      expect(process.env.BRIM_REQUIRE_FRAMEWORKS, py.reason).not.toBe("1");
    } else expect(existsSync(py.path)).toBe(true);
  });
});
