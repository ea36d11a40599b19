import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";
import { hasModules } from "../helpers/python.ts";

// A JAX loop whose last batch of an epoch is short: jax.jit traces and compiles the step again for
// that shape, in the middle of the run. That step is many steps' time; the attach sends it as a
// warm-up step (`compiled: true`), so the steady figures (and a tune's windows) leave it out.
const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const hasJax = hasModules(PYTHON, "jax");
const required = process.env.BRIM_REQUIRE_FRAMEWORKS === "1";
if (!hasJax && required) throw new Error(`BRIM_REQUIRE_FRAMEWORKS=1 but ${PYTHON} has no jax`);
const root = mkdtempSync(join(tmpdir(), "brim-jax-compile-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Step {
  kind: string;
  pid: number;
  step: number;
  samples: number | null;
  warmup: boolean;
  compiled?: boolean;
  compute_s: number | null;
  wait_s: number | null;
}

describe.skipIf(!hasJax)("the JAX attach and a step that compiles again", () => {
  it(
    "the short last batch of epoch 1 compiles: a warm-up step; epoch 2's short batch, cached, is steady",
    () => {
      const store = join(root, "store");
      const r = spawnSync(
        process.execPath,
        [
          join(REPO, "bin", "brim.js"),
          "run",
          "--json",
          "--store",
          store,
          "--steps",
          "12",
          "--warmup",
          "1",
          "--",
          PYTHON,
          join(REPO, "test/jobs/jax_epochs.py"),
        ],
        { encoding: "utf8", timeout: scaled(120_000), env: { ...process.env, NO_COLOR: "1" } },
      );
      expect(r.status, r.stderr).toBe(0);
      const meta = JSON.parse(r.stdout) as { id: string; summary: { steps: number; steady_steps: number } };
      expect(meta.summary.steps).toBe(12);
      const steps = readFileSync(join(store, "runs", meta.id, "timeline.ndjson"), "utf8")
        .split("\n")
        .filter((l) => l.includes('"kind":"step"'))
        .map((l) => JSON.parse(l) as Step);
      expect(steps.map((s) => s.samples)).toEqual([32, 32, 32, 4, 32, 32, 32, 4, 32, 32, 32, 4]);
      // the first call compiles, and the first short batch: both warm-up, marked as compiled
      expect(steps.map((s) => s.warmup)).toEqual([true, false, false, true, false, false, false, false, false, false, false, false]);
      expect(steps.filter((s) => s.compiled === true).map((s) => s.step)).toEqual([0, 3]);
      expect(meta.summary.steady_steps).toBe(10);
      expect(readdirSync(join(store, "runs"))).toHaveLength(1);
    },
    scaled(150_000),
  );
});
