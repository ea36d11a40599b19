import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { hasModules } from "../helpers/python.ts";
import { scaled } from "../helpers/time.ts";

// A full-batch job with a closure optimizer (test/jobs/lbfgs_full_batch.py: LBFGS runs up to 5
// forward/backward passes inside each optimizer.step(closure), on the whole data, no loader, no batch
// knob): brim run counts optimizer steps, not the closure's passes, and brim tune runs the one trial
// that can be run and says there is nothing to tune instead of trials that cannot differ.
const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? join(REPO, ".venv", "bin", "python");
const hasTorch = hasModules(PYTHON, "torch");
const built = existsSync(join(REPO, "dist", "cli", "main.js"));
const root = mkdtempSync(join(tmpdir(), "brim-lbfgs-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const JOB = join(REPO, "test", "jobs", "lbfgs_full_batch.py");
const brim = (...args: string[]) =>
  spawnSync(process.execPath, [join(REPO, "bin", "brim.js"), ...args], { encoding: "utf8", timeout: scaled(240_000), env: { ...process.env, NO_COLOR: "1" } });

describe.skipIf(!hasTorch || !built)("a closure optimizer on the full batch", () => {
  it(
    "brim run --steps 10 stops after 10 optimizer steps, each of several closure passes",
    () => {
      const store = join(root, "run");
      const r = brim("run", "--json", "--store", store, "--steps", "10", "--", PYTHON, JOB, "--log-every", "1");
      expect(r.status, r.stderr.slice(-1500)).toBe(0);
      const meta = JSON.parse(r.stdout) as { summary: { steps: number; throughput_source: string } };
      expect(meta.summary.steps).toBe(10);
      expect(meta.summary.throughput_source).toBe("attach");
      // the job's own count: 9 optimizer steps had ended (10 closure passes would be 2 of them)
      const output = readFileSync(join(store, "runs", readdirSync(join(store, "runs"))[0] as string, "output.log"), "utf8");
      expect(output).toMatch(/step 9 loss/);
      expect(output).not.toMatch(/step 11 loss/);
    },
    scaled(240_000),
  );

  it(
    "brim tune runs one trial and says in one line that nothing can be tuned (exit 3)",
    () => {
      const store = join(root, "tune");
      // cpu_threads, which every PyTorch job has, is fixed: beside busy cores it would be tried (test/tune/cpu-threads.test.ts)
      const r = brim("tune", "--store", store, "--max-trials", "3", "--steps", "6", "--fix", "cpu_threads", "--", PYTHON, JOB);
      expect(r.status, r.stderr.slice(-1500)).toBe(3);
      expect(`${r.stdout}\n${r.stderr}`).toMatch(/^no winner: nothing to tune: no knob brim can vary was found/m);
      const [id = "(no tune)"] = readdirSync(join(store, "tunes"));
      const record = JSON.parse(readFileSync(join(store, "tunes", id, "tune.json"), "utf8")) as { stop_reason: string; trials: unknown[] };
      expect(record.stop_reason).toBe("nothing_to_tune");
      expect(record.trials).toHaveLength(1);
    },
    scaled(240_000),
  );
});
