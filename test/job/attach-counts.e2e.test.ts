// What the attach counts on jobs with no DataLoader and with progress bars before training, through
// the built CLI and real child processes (issue 36): a bar the job prints before its first step is
// no step (the budget is not spent on it); a PPO-shaped job's samples are its minibatch rows, read
// from the model's input; the RL Zoo's PPO over SubprocVecEnv (when the corpus venv is there) also
// sends its environment steps.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { RunMeta, RunSummary, TimelineEntry } from "../../src/record/types.ts";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const VENV = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? (existsSync(VENV) ? VENV : "/usr/bin/python3");
const CORPUS_PYTHON = join(REPO, ".venv-corpus", "bin", "python");
const hasTorch = spawnSync(PYTHON, ["-c", "import torch"], { encoding: "utf8" }).status === 0;
const hasZoo = existsSync(CORPUS_PYTHON) && spawnSync(CORPUS_PYTHON, ["-c", "import rl_zoo3, torch"], { encoding: "utf8" }).status === 0;
const root = mkdtempSync(join(tmpdir(), "brim-attach-counts-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Step {
  kind: "step";
  pid: number;
  step: number;
  source?: string;
  samples: number | null;
  extra?: Record<string, unknown>;
}
interface Run {
  status: number | null;
  stderr: string;
  meta: RunMeta & { summary: RunSummary };
  timeline: TimelineEntry[];
  steps: Step[];
  output: string;
}

function brimRun(name: string, steps: number, job: string[], cwd = root): Run {
  const store = join(root, name);
  const result = spawnSync(process.execPath, [BRIM, "run", "--json", "--store", store, "--steps", String(steps), "--", ...job], {
    cwd,
    encoding: "utf8",
    timeout: scaled(300_000),
  });
  const meta = JSON.parse(result.stdout) as Run["meta"];
  const dir = join(store, "runs", meta.id);
  const timeline = readFileSync(join(dir, "timeline.ndjson"), "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as TimelineEntry);
  const stepEntries = timeline.filter((entry) => entry.kind === "step") as unknown as Step[];
  return { status: result.status, stderr: result.stderr, meta, timeline, steps: stepEntries, output: readFileSync(join(dir, "output.log"), "utf8") };
}

const events = (run: Run, kind: string) => run.timeline.filter((entry) => entry.kind === "event" && (entry as { event?: string }).event === kind);

describe.skipIf(!hasTorch)("the attach's count on jobs brim never saw", () => {
  it("a data-preparation bar before training spends no step of the budget; the training bar is not counted beside the attach", () => {
    const run = brimRun("prep", 5, [PYTHON, join(REPO, "test", "jobs", "prep_bar_then_train.py"), "--items", "40"]);
    expect(run.meta.end?.cause, run.stderr).toBe("ok");
    expect(run.status).toBe(0);
    // before: the 40 items of the bar were 40 steps, and the budget of 5 stopped the job while it prepared
    expect(run.output).toContain("prepared 40 items");
    expect(run.steps.map((step) => step.step)).toEqual([0, 1, 2, 3, 4]);
    expect(run.steps.every((step) => step.source === "attach" && step.samples === 16)).toBe(true);
    expect(run.meta.summary.throughput_source).toBe("attach");
    expect(events(run, "attach_on").length).toBe(1);
  });

  it("PPO minibatches sliced from a rollout: samples per step are the minibatch rows, from the model's input", () => {
    const run = brimRun("ppo", 24, [PYTHON, join(REPO, "test", "jobs", "ppo_rollout.py"), "--batch-size", "32"]);
    expect(run.meta.end?.cause, run.stderr).toBe("ok");
    expect(run.steps.length).toBe(24);
    expect(run.steps.every((step) => step.samples === 32)).toBe(true);
    expect(run.meta.summary.samples_per_s).toBeGreaterThan(0);
    const told = events(run, "samples_source") as unknown as { details: Record<string, unknown> }[];
    expect(told.map((event) => event.details)).toEqual([{ source: "model_input", samples: 32 }]);
  });

  it.skipIf(!hasZoo)(
    "the RL Zoo's PPO over 4 SubprocVecEnv processes: samples are its batch_size, environment steps go out with each step",
    () => {
      const dir = join(root, "rl-zoo3-ppo");
      cpSync(join(REPO, "corpus", "rl-zoo3-ppo"), dir, { recursive: true });
      const command = ["-m", "rl_zoo3.train", "--algo", "ppo", "--env", "CartPole-v1", "--vec-env", "subproc", "--conf-file", "ppo.yml"];
      const run = brimRun("zoo", 20, [CORPUS_PYTHON, ...command, "--eval-freq", "-1", "--log-folder", "logs", "--seed", "0"], dir);
      expect(run.meta.end?.cause, run.stderr).toBe("ok");
      expect(run.steps.length).toBe(20);
      expect(run.steps.every((step) => step.samples === 64)).toBe(true); // ppo.yml: batch_size 64
      // 4 environments × n_steps 128 per rollout, before the first update
      expect(run.steps[0]?.extra).toEqual({ env_steps: 512 });
      expect(run.meta.summary.samples_per_s).toBeGreaterThan(0);
      // the environment workers say nothing of torch: only the trainer's process
      expect(events(run, "attach_on").length).toBe(1);
    },
    scaled(300_000),
  );
});
