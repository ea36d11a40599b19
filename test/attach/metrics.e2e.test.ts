import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readTimeline } from "../../src/record/timeline/index.ts";
import type { RunMeta, TimelineEntry } from "../../src/record/types.ts";
import { scaled } from "../helpers/time.ts";
import { hasModules } from "../helpers/python.ts";

// The job's own logged scalars with no code change (python/brim/_metrics.py): Lightning's self.log in
// training and the HF Trainer's log, through the built CLI, on the real frameworks of BRIM_TEST_PYTHON.
const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-metrics-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const has = (module: string): boolean => hasModules(PYTHON, module);
const required = process.env.BRIM_REQUIRE_FRAMEWORKS === "1";

/** `json: false`: brim's own output, as a user sees it (the job's on stdout, brim's summary on stderr); the run is the store's one. */
function run(
  name: string,
  args: string[],
  { json = true } = {},
): { meta: RunMeta; dir: string; steps: ReturnType<typeof readTimeline>["steps"]; stdout: string; stderr: string } {
  const store = join(root, name);
  const result = spawnSync(process.execPath, [BRIM, "run", ...(json ? ["--json"] : []), "--quiet", "--store", store, ...args], {
    cwd: REPO,
    encoding: "utf8",
    timeout: scaled(300_000),
    env: { ...process.env, NO_COLOR: "1" },
  });
  expect(result.status, result.stderr).toBe(0);
  const ids = readdirSync(join(store, "runs"));
  expect(ids).toHaveLength(1);
  const dir = join(store, "runs", ids[0] as string);
  const meta = json ? (JSON.parse(result.stdout) as RunMeta) : (JSON.parse(readFileSync(join(dir, "run.json"), "utf8")) as RunMeta);
  expect(meta.id).toBe(ids[0]);
  const entries = readFileSync(join(dir, "timeline.ndjson"), "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as TimelineEntry);
  return { meta, dir, steps: readTimeline(entries).steps, stdout: result.stdout, stderr: result.stderr };
}

describe("the job's own logged scalars, with no code change", () => {
  it.skipIf(!required && !has("lightning"))(
    "Lightning: every step carries what self.log got, the same value that went backward",
    () => {
      // the example as shipped, as a user runs it: this run is also test/examples' check that it trains
      // under brim run and reports its steps (one Lightning process, ~13 s of CPU, not two)
      const { steps, meta, stdout, stderr } = run(
        "lightning",
        ["--steps", "8", "--", PYTHON, "examples/lightning/train.py", "--config", "examples/lightning/config.yaml"],
        { json: false },
      );
      expect(stdout).toMatch(/^\[lightning\] done steps=8 /m);
      expect(stderr).toMatch(/· 8 steps/);
      expect(steps.length).toBe(8);
      for (const step of steps) {
        // the example logs self.log("loss", loss) and returns the same loss for backward
        expect(step.metrics?.loss).toBeTypeOf("number");
        expect(step.metrics?.loss).toBeCloseTo(step.loss as number, 5);
      }
      // brim report draws it beside brim's own charts
      const out = join(root, "report-lightning");
      const report = spawnSync(process.execPath, [BRIM, "report", meta.id, "--store", join(root, "lightning"), "--out", out, "--no-png"], { encoding: "utf8" });
      expect(report.status, report.stderr).toBe(0);
      expect(existsSync(join(out, "charts", "metric-loss.svg"))).toBe(true);
      expect(readFileSync(join(out, "report.md"), "utf8")).toContain("loss (logged by the job)");
    },
    scaled(300_000),
  );

  it.skipIf(!required && !has("transformers"))(
    "HF Trainer: its log (loss, learning rate, gradient norm) lands on the steps it was made at",
    () => {
      // the example's BERT narrowed (its own --set): the log's plumbing is asserted, not the model, and
      // 25 steps of the full one cost half a minute of CPU (it runs whole in test/examples)
      const narrow = ["model.hidden_size=64", "model.layers=1", "model.intermediate_size=128", "model.seq_len=32"].flatMap((set) => ["--set", set]);
      const { steps } = run("hf", ["--steps", "25", "--", PYTHON, "examples/hf-trainer/train.py", "--config", "examples/hf-trainer/config.yaml", ...narrow]);
      // the example logs every 10 steps: two logs within 25 steps, each on the step after the Trainer's
      const logged = steps.filter((step) => step.metrics?.learning_rate !== undefined);
      expect(logged.length).toBeGreaterThanOrEqual(2);
      for (const step of logged) {
        expect(step.metrics?.loss).toBeGreaterThan(0);
        expect(step.metrics?.grad_norm).toBeGreaterThanOrEqual(0);
      }
      expect(steps.some((step) => step.metrics?.train_runtime !== undefined)).toBe(false);
    },
    scaled(300_000),
  );
});
