// The GPU campaign (bench/gpu/run.sh) end to end on the CPU, in its quick mode: one tiny N-BEATS,
// two micro-batches, fp32, a few steps and trials. It debugs the scripts before GPU time is spent:
// every part runs, every result file has the fields the fit script and the docs rely on, and a
// second call resumes (measures nothing again).
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

const root = new URL("../../", import.meta.url).pathname;
// The job is not the subject here (the scripts are): it runs on the oldest PyTorch there is, as
// bench/gpu/README.md's smoke run does — a job process there costs a third of the CPU of one on 2.x
// (no torch._dynamo); without one, on the main Python
const hasTorch = (py: string): boolean =>
  existsSync(py) && spawnSync(py, ["-c", "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)"]).status === 0;
const python =
  [process.env.BRIM_TEST_LEGACY_PYTHON ?? "/usr/bin/python3", process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3"].find(hasTorch) ?? "/usr/bin/python3";
const tmp = mkdtempSync(join(tmpdir(), "brim-campaign-test-"));
const out = join(tmp, "out");

type Rec = Record<string, unknown> & { key: string; ok: boolean; command: string[]; started_at: string; ended_at: string };

function campaign(args: string[], outDir: string): { status: number | null; stdout: string; stderr: string } {
  const env: NodeJS.ProcessEnv = { ...process.env, BRIM_BIN: join(root, "bin", "brim.js"), PYTHON: python };
  delete env.OUT;
  const res = spawnSync("bash", [join(root, "bench/gpu/run.sh"), ...args, "--out", outDir, "--work", join(tmp, "work"), "--prior", join(tmp, "no-prior")], {
    cwd: root,
    env,
    encoding: "utf8",
    timeout: scaled(280_000),
  });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

function records(part: string, dir = out): Rec[] {
  const file = join(dir, "cpu", `${part}.jsonl`);
  expect(existsSync(file), `${file} exists`).toBe(true);
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Rec);
}

function expectEnvelope(r: Rec, part: string): void {
  expect(r).toMatchObject({ schema: "brim.gpu-campaign/v1", part, quick: true, ok: true, error: null });
  expect(r.command[0]).toBe("node");
  expect(typeof r.command_line).toBe("string");
  expect(Date.parse(r.started_at)).toBeLessThanOrEqual(Date.parse(r.ended_at));
  expect(r.machine).toMatchObject({ backend: "cpu", gpus: [] });
  const versions = r.versions as Record<string, unknown>;
  expect(versions.node).toBe(process.version);
  for (const k of ["brim", "python", "torch"]) expect(typeof versions[k]).toBe("string");
  // the commit measured, which BENCHMARKS.md dates the part by (scripts/benchmarks.mjs)
  expect(versions.brim_commit).toMatch(/^[0-9a-f]{40}$/);
}

let first: { status: number | null; stdout: string; stderr: string };

beforeAll(() => {
  if (!existsSync(join(root, "dist", "cli", "main.js")))
    execFileSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"], { cwd: root });
  first = campaign(["all", "--quick", "--budget", "600s"], out);
}, scaled(300_000));

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("bash bench/gpu/run.sh all --quick (CPU)", () => {
  it("runs every part and exits 0", () => {
    expect(first.stderr.split("\n").filter((l) => /error|Error/.test(l))).toEqual([]);
    expect(first.status).toBe(0);
    for (const part of ["plan-accuracy", "guard", "tune", "utilization", "overhead"]) expect(first.stdout).toContain(`part ${part}: jobs quick-nbeats`);
    expect(first.stdout).not.toContain("FAILED");
    const machine = JSON.parse(readFileSync(join(out, "cpu", "machine.json"), "utf8")) as Record<string, unknown>;
    expect(machine).toMatchObject({ schema: "brim.gpu-campaign/v1", machine: { backend: "cpu" } });
    expect(typeof (machine.versions as Record<string, unknown>).torch).toBe("string");
    expect(readFileSync(join(out, "cpu", "campaign.log"), "utf8")).toContain("done in");
  });

  it("records plan/measurement pairs with the plan's components, constants and the SDK profile's plan", () => {
    const pairs = records("plan-accuracy");
    expect(pairs.map((r) => r.key).sort()).toEqual(["quick-nbeats|fp32|16", "quick-nbeats|fp32|4"]);
    for (const r of pairs) {
      expectEnvelope(r, "plan-accuracy");
      expect(r.command).toEqual(expect.arrayContaining(["run", "--knob", `batch_size=${String(r.micro_batch)}`, "precision=fp32"]));
      const predicted = r.predicted as {
        spec: { peak_bytes: number; components: Record<string, number>; assumptions: { name: string }[] };
        profile: { peak_bytes: number } | null;
      };
      expect(predicted.spec.peak_bytes).toBeGreaterThan(0);
      expect(Object.keys(predicted.spec.components)).toEqual(
        expect.arrayContaining(["weights", "activations", "workspace", "cuda_context", "allocator_slack"]),
      );
      expect(predicted.spec.assumptions.map((a) => a.name)).toEqual(
        expect.arrayContaining(["cuda_context_bytes", "cudnn_workspace_bytes", "allocator_slack_fraction"]),
      );
      expect(predicted.profile?.peak_bytes).toBeGreaterThan(0);
      const measured = r.measured as Record<string, number | null>;
      for (const k of ["peak_tree_gpu_bytes", "framework_peak_reserved_bytes", "framework_peak_allocated_bytes"]) expect(measured).toHaveProperty(k);
      expect(measured.peak_tree_rss_bytes).toBeGreaterThan(0);
      expect(measured.steps).toBe(3);
      expect((r.commands as { plan_spec: string[] }).plan_spec).toEqual(expect.arrayContaining(["plan", "--batch", String(r.micro_batch), "--json"]));
    }
  });

  it("guards: the cap holds and an injected out-of-memory error is recovered with no step lost", () => {
    const guard = records("guard");
    expect(guard.map((r) => r.case)).toEqual(["cap-fit", "oom-injected"]);
    for (const r of guard) expectEnvelope(r, "guard");
    const oom = guard[1] as Rec & { checks: Record<string, boolean>; events: { event: string; step: number }[]; env: Record<string, string> };
    expect(oom.env).toEqual({ BRIM_FAULT_OOM_AT_STEP: "1" });
    expect(oom.checks).toEqual({ ended_ok: true, peak_under_cap: true, steps_equal_budget: true, oom_recovered_event: true });
    expect(oom.events).toContainEqual(expect.objectContaining({ event: "oom_recovered", step: 1 }));
  });

  it("tunes from the naive config and compares the winner with the grid's best", () => {
    const tune = records("tune");
    expect(tune.map((r) => r.key)).toEqual(["quick-nbeats|brim", "quick-nbeats|grid"]);
    for (const r of tune) expectEnvelope(r, "tune");
    const brim = tune[0]!.tune as {
      trials_count: number;
      winner: { knobs: Record<string, unknown>; speedup: number; samples_per_s: number } | null;
      no_winner: { reason: string; next: string } | null;
      baseline: { samples_per_s: number };
    };
    expect(brim.trials_count).toBeGreaterThanOrEqual(2);
    expect(brim.baseline.samples_per_s).toBeGreaterThan(0);
    expect(tune[0]!.wall_s).toBeGreaterThan(0);
    expect(tune[1]!.command).toEqual(expect.arrayContaining(["--strategy", "grid", "batch_size=8,32", "--fix", "cpu_threads"]));
    // which verdict a live tune on a busy CPU reaches is measured speed, not this test's to decide:
    // either a winner, compared with the grid's best, or no winner with its reason
    if (brim.winner !== null) {
      expect(brim.winner.speedup).toBeGreaterThan(0);
      expect(tune[1]!.brim_winner_share_of_grid_best).toBeGreaterThan(0);
    } else {
      expect(brim.no_winner?.reason).toMatch(/\S/);
      expect(tune[1]!.brim_winner_share_of_grid_best).toBeNull();
    }
  });

  it("measures utilization before and after tuning, and overhead as a ratio", () => {
    const util = records("utilization");
    expect(util.map((r) => r.key)).toEqual(["quick-nbeats|before", "quick-nbeats|after"]);
    for (const r of util) {
      expectEnvelope(r, "utilization");
      expect(r).toHaveProperty("gpu_util_mean");
      expect(r).toHaveProperty("sm_activity_mean");
      expect(r.samples_per_s).toBeGreaterThan(0);
    }
    expect(typeof (util[1]!.knobs as Record<string, unknown>).batch_size).toBe("number");
    const [over] = records("overhead");
    expectEnvelope(over!, "overhead");
    expect(over!.command).toEqual(expect.arrayContaining(["--hz", "10"]));
    expect(over!.ratio).toBeGreaterThan(0);
    expect((over!.runs as { mode: string }[]).map((r) => r.mode)).toEqual(["bare", "brim"]);
  });

  it(
    "resumes: a second call with the first one's results as prior measures nothing again and carries every record",
    () => {
      const again = join(tmp, "again");
      const env: NodeJS.ProcessEnv = { ...process.env, BRIM_BIN: join(root, "bin", "brim.js"), PYTHON: python };
      delete env.OUT;
      const res = spawnSync("bash", [join(root, "bench/gpu/run.sh"), "all", "--quick", "--out", again, "--prior", out, "--work", join(tmp, "work")], {
        cwd: root,
        env,
        encoding: "utf8",
        timeout: scaled(120_000),
      });
      expect(res.status).toBe(0);
      expect(res.stdout).toContain("plan-accuracy: 0 pairs to measure");
      expect(res.stdout).not.toMatch(/: ok$/m);
      for (const part of ["plan-accuracy", "guard", "tune", "utilization", "overhead"]) expect(records(part, again).length).toBe(records(part).length);
    },
    scaled(120_000),
  );

  it("the fit script reads the pairs and leaves out the CPU smoke records", () => {
    const res = spawnSync(process.execPath, [join(root, "bench/gpu/fit-constants.mjs"), out, "--json"], { encoding: "utf8" });
    expect(res.status).toBe(0);
    const result = JSON.parse(res.stdout) as { pairs: number; skipped: Record<string, number>; fit: unknown };
    expect(result).toMatchObject({ pairs: 0, skipped: { "quick (CPU smoke) record": 2 }, fit: null });
    const withQuick = JSON.parse(
      spawnSync(process.execPath, [join(root, "bench/gpu/fit-constants.mjs"), out, "--json", "--include-quick"], { encoding: "utf8" }).stdout,
    ) as { skipped: Record<string, number> };
    expect(withQuick.skipped).toEqual({ "no measured tree peak": 2 });
  });

  it(
    "leaves the CUDA memory snapshots out of all; named, it runs them, and on the CPU records why there is nothing to record",
    () => {
      expect(existsSync(join(out, "cpu", "snapshots.jsonl"))).toBe(false);
      const dir = join(tmp, "snapshots");
      const res = campaign(["snapshots", "--quick", "--budget", "120s"], dir);
      expect(res.status, res.stderr).toBe(0);
      const recs = records("snapshots", dir);
      expect(recs.map((r) => r.key)).toEqual(["quick-nbeats|fp32|4", "quick-nbeats|fp32|16"]);
      for (const r of recs) {
        expect(r).toMatchObject({ part: "snapshots", ok: false, error: "no CUDA device: nothing to record", snapshot: { cuda: false } });
        // the job ran, unchanged, under the wrapper, and stopped at the step budget
        expect(r.command.join(" ")).toMatch(/ bench\/gpu\/memory_history\.py --summary \S+ -- examples\/nbeats\/train\.py /);
        expect(r).toMatchObject({ end: { cause: "ok" }, measured: { steps: 3 } });
      }
    },
    scaled(200_000),
  );

  it("rejects an unknown part with the usage", () => {
    const res = campaign(["everything"], join(tmp, "bad"));
    expect(res.status).toBe(2);
    expect(res.stderr).toContain("unknown part 'everything'");
  });
});
