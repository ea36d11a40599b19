import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

// `brim plan -- <command>` through the built CLI, on bundled examples and on jobs of ours shaped like
// the scripts users bring (test/jobs/: an argv batch flag on a sequence-first LSTM, a batch size that is
// a literal default argument, a JAX module), each run in a temporary copy, unmodified.
const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const store = mkdtempSync(join(tmpdir(), "brim-plan-script-"));
const work = mkdtempSync(join(tmpdir(), "brim-plan-lstm-"));
const JOBS = join(REPO, "test", "jobs");
afterAll(() => {
  rmSync(store, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

interface Plan {
  params: { total: number; trainable: number };
  fit: {
    method: string;
    points: { micro_batch: number; saved_bytes: number; recurrent: { calls: number; cpu_saved_bytes: number; cudnn_saved_bytes: number } | null }[];
    saved_per_sample_bytes: number;
  };
  yours: { micro_batch: number; accumulation: number; precision: string };
  gpus: { gpu: { id: string }; largest: Record<string, number | null>; yours: { share_of_gpu: number; fits: boolean }; calibration: string | null }[];
}

const plan = (cwd: string, env: Record<string, string>, ...args: string[]) =>
  spawnSync(process.execPath, [BRIM, "plan", "--store", store, ...args], { cwd, encoding: "utf8", timeout: scaled(240_000), env: { ...process.env, ...env } });

describe("brim plan -- <command>", () => {
  it("plans a bundled example from its own config, at two micro-batches, for three GPUs side by side", () => {
    const r = plan(
      REPO,
      {},
      "--gpu",
      "t4,a100-80gb,h100-sxm",
      "--steps",
      "2",
      "--",
      PYTHON,
      "examples/cnn-lstm/train.py",
      "--config",
      "examples/cnn-lstm/config.yaml",
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/knobs found: batch_size=16 \(examples\/cnn-lstm\/config\.yaml: /);
    expect(r.stderr).toMatch(/measuring the job at micro-batch 8 for 2 steps: .*\.config\.yaml\.brim-plan-/);
    expect(r.stdout).toMatch(/^ {2}fp32 +[\d,]+ +[\d,]+ +[\d,]+$/m);
    expect(r.stdout).toMatch(/^ {2}bf16-mixed +— +[\d,]+ +[\d,]+$/m);
    expect(r.stdout).toMatch(/^- T4 \(15\.\d+ GiB\): your config uses [\d.]+ %/m);
    expect(r.stdout).toMatch(/GPU-only +added to every column/);
    expect(r.stdout).toMatch(/calibrated for h100-sxm by hopper-torch2/);
    // the error bars of models like it, and what the one recorded model with convolutions showed
    expect(r.stdout).toMatch(/accuracy {3}this path .* planned the 48 recorded H100 peaks of models without convolutions within 3\.4 % median, 30 % worst/);
    expect(r.stdout).toMatch(/yours has convolutions: the one recorded model with them \(cnn-lstm\) was planned 20 % under in the median, up to 31 %/);
    // the LSTM is planned as cuDNN keeps it, the 1-D convolution's workspace modelled: nothing named as left out
    expect(r.stdout).not.toMatch(/on a GPU cuDNN adds workspaces/);
    expect(r.stdout).toMatch(/1-D convolutions' cuDNN workspace is modelled from the largest im2col matrix, [\d,]+ B at micro-batch 16/);
    expect(r.stdout).toMatch(/recurrent layers \(1 call\(s\) per forward at micro-batch 16\) saved [\d,]+ B on the CPU; they are planned as cuDNN keeps them/);
  }, 240_000);

  it("plans an LSTM as cuDNN keeps it: the script's plan equals the one from the same model's spec, not the CPU kernels' layout", () => {
    const r = plan(
      REPO,
      {},
      "--json",
      "--gpu",
      "h100-sxm",
      "--steps",
      "2",
      "--",
      PYTHON,
      "examples/lstm-transformer/train.py",
      "--config",
      "examples/lstm-transformer/config.yaml",
    );
    expect(r.status, r.stderr).toBe(0);
    const p = JSON.parse(r.stdout) as {
      fit: { points: { micro_batch: number; recurrent: { calls: number; cpu_saved_bytes: number; cudnn_saved_bytes: number } | null }[] };
      gpus: { yours: { micro_batch: number; peak_bytes: number }; components: Record<string, number> }[];
    };
    const hi = p.fit.points.at(-1);
    expect(hi?.recurrent?.calls).toBe(1);
    // the CPU's LSTM keeps per-step tensors: more than 2× cuDNN's reserve space and output
    expect((hi?.recurrent?.cpu_saved_bytes ?? 0) / (hi?.recurrent?.cudnn_saved_bytes ?? 1)).toBeGreaterThan(2);
    const yours = p.gpus[0]?.yours;
    expect(yours?.micro_batch).toBe(16);
    const spec = spawnSync(
      process.execPath,
      [BRIM, "plan", "examples/lstm-transformer/lstm.yaml", "--json", "--gpu", "h100-sxm", "--batch", "16", "--precision", "fp32"],
      {
        cwd: REPO,
        encoding: "utf8",
      },
    );
    expect(spec.status, spec.stderr).toBe(0);
    const fromSpec = JSON.parse(spec.stdout) as { memory: { peak_bytes: number; components: Record<string, number> } };
    expect(Math.abs((yours?.peak_bytes ?? 0) / fromSpec.memory.peak_bytes - 1)).toBeLessThan(0.001);
    expect(Math.abs((p.gpus[0]?.components["temporaries"] ?? 0) / (fromSpec.memory.components["temporaries"] ?? 1) - 1)).toBeLessThan(0.001);
  }, 240_000);

  it("plans an unmodified script from its argv knob, in a copy", () => {
    cpSync(join(JOBS, "word_lm.py"), join(work, "word_lm.py"));
    const r = plan(work, {}, "--json", "--steps", "2", "--", PYTHON, "word_lm.py", "--epochs", "1", "--batch_size", "20", "--emsize", "100", "--nhid", "100");
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/measuring the job at micro-batch 10 for 2 steps: .* --batch_size 10 /);
    const p = JSON.parse(r.stdout) as Plan;
    expect(p.fit.method).toBe("two-point");
    expect(p.fit.points.map((x) => x.micro_batch)).toEqual([10, 20]);
    // what autograd saves grows with the batch, and part of it does not (the LSTM's weights as saved)
    const [lo, hi] = p.fit.points;
    expect((hi?.saved_bytes ?? 0) / (lo?.saved_bytes ?? 1)).toBeGreaterThan(1.5);
    expect(p.params.trainable).toBeGreaterThan(100_000);
    // its nn.LSTM (sequence-first) is seen and planned as cuDNN keeps it
    expect(hi?.recurrent?.calls).toBe(1);
    expect(hi?.recurrent?.cudnn_saved_bytes).toBeLessThan(hi?.recurrent?.cpu_saved_bytes ?? 0);
    expect(p.yours).toMatchObject({ micro_batch: 20, accumulation: 1, precision: "fp32" });
    expect(p.gpus.map((g) => g.gpu.id)).toEqual(["t4", "rtx-4090", "a100-80gb", "h100-sxm"]);
    for (const g of p.gpus) {
      expect(g.yours.fits).toBe(true);
      expect(g.largest.fp32).toBeGreaterThan(20);
    }
  }, 240_000);

  it("plans an unmodified script whose batch size is a literal in its code (a default argument: no DataLoader, no flag)", () => {
    const dir = mkdtempSync(join(tmpdir(), "brim-plan-literal-"));
    cpSync(join(JOBS, "literal_sgd.py"), join(dir, "main.py"));
    const before = readFileSync(join(dir, "main.py"), "utf8");
    const r = plan(dir, {}, "--json", "--gpu", "t4,a100-80gb,h100-sxm", "--steps", "2", "--", PYTHON, "main.py");
    const after = readFileSync(join(dir, "main.py"), "utf8");
    rmSync(dir, { recursive: true, force: true });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/batch_size=32 is written in the code at main\.py:12: the measuring runs vary it there, in memory \(the file is not touched\)/);
    const p = JSON.parse(r.stdout) as Plan;
    // the second run's batch size came from the literal edited in memory: what autograd saved doubled
    expect(p.fit.method).toBe("two-point");
    expect(p.fit.points.map((x) => x.micro_batch).sort((a, b) => a - b)).toEqual([16, 32]);
    const [lo, hi] = [...p.fit.points].sort((a, b) => a.micro_batch - b.micro_batch);
    expect(hi?.saved_bytes).toBe(2 * (lo?.saved_bytes ?? 0));
    expect(p.yours).toMatchObject({ micro_batch: 32 });
    expect(p.gpus).toHaveLength(3);
    expect(after).toBe(before);
  }, 240_000);

  // jax found, not imported (its import costs seconds of CPU; the measuring run imports it)
  it.skipIf(spawnSync(PYTHON, ["-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('jax') is None)"]).status !== 0)(
    "says a JAX job cannot be measured this way, in one line, and exits 2",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "brim-plan-jax-"));
      cpSync(join(JOBS, "jax_literal.py"), join(dir, "jax_literal.py"));
      const r = plan(dir, {}, "--steps", "2", "--", PYTHON, "-m", "jax_literal");
      rmSync(dir, { recursive: true, force: true });
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr.trim().split("\n").at(-1)).toMatch(
        /^brim: run \S+ is a JAX job: brim plan -- <command> measures what PyTorch's autograd holds, .*brim plan model\.yaml/,
      );
    },
    240_000,
  );

  it("plans the precision given with --knob, from activations measured under the job's own autocast", () => {
    const r = plan(
      REPO,
      {},
      "--json",
      "--gpu",
      "h100-sxm",
      "--steps",
      "2",
      "--knob",
      "precision=bf16-mixed",
      "--",
      PYTHON,
      "examples/nbeats/train.py",
      "--config",
      "examples/nbeats/config.yaml",
    );
    expect(r.status, r.stderr).toBe(0);
    const p = JSON.parse(r.stdout) as {
      yours: { precision: string; precision_from: string };
      fit: { points: { autocast: string | null }[] };
      profile: { per_sample: { saved_bytes: Record<string, number>; largest_saved_bytes: number } };
    };
    expect(p.yours).toMatchObject({ precision: "bf16-mixed", precision_from: "--knob precision: bf16-mixed" });
    // autocast is left before the backward: the footprint reads it during the forward
    expect(p.fit.points.map((x) => x.autocast)).toEqual(["torch.bfloat16", "torch.bfloat16"]);
    const saved = p.profile.per_sample.saved_bytes;
    expect(saved["bf16-mixed"]).toBeGreaterThan(0);
    expect(saved.fp32).toBe(2 * (saved["bf16-mixed"] ?? 0));
    // the largest saved tensor at both points is the first Linear's bf16 weight copy (fixed): the
    // per-sample largest is the activation's, which grows with the batch
    expect(p.profile.per_sample.largest_saved_bytes).toBeGreaterThan(0);
    expect(p.profile.per_sample.largest_saved_bytes).toBeLessThan(10_000);
  }, 240_000);

  it("on a host with no GPU, measures a config's 16-bit precision in fp32 and models it (CPU autocast is not CUDA's)", () => {
    const dir = mkdtempSync(join(tmpdir(), "brim-plan-bf16-"));
    cpSync(join(REPO, "examples/nbeats/model.yaml"), join(dir, "model.yaml"));
    writeFileSync(
      join(dir, "config.yaml"),
      readFileSync(join(REPO, "examples/nbeats/config.yaml"), "utf8").replace(/precision: fp32 /, "precision: bf16-mixed "),
    );
    const r = plan(REPO, {}, "--json", "--gpu", "h100-sxm", "--steps", "2", "--", PYTHON, "examples/nbeats/train.py", "--config", join(dir, "config.yaml"));
    rmSync(dir, { recursive: true, force: true });
    expect(r.status, r.stderr).toBe(0);
    const p = JSON.parse(r.stdout) as { yours: { precision: string; precision_from: string }; fit: { points: { autocast: string | null }[] }; notes: string[] };
    expect(p.yours).toMatchObject({ precision: "bf16-mixed", precision_from: "the config's precision: bf16-mixed" });
    expect(p.fit.points.map((x) => x.autocast)).toEqual([null, null]);
    expect(p.notes.join("\n")).toMatch(/measured in fp32 on this host with no GPU, your bf16-mixed modelled from it/);
  }, 240_000);

  it("prints a failed measuring run's last lines and exits non-zero", () => {
    const r = plan(REPO, {}, "--", PYTHON, "-c", "import sys; print('loading data'); sys.exit('bad config: no such file data.csv')");
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/\| loading data\n {2}\| bad config: no such file data\.csv\n/);
    expect(r.stderr).toMatch(/did not end ok \(crashed: .*\); nothing is planned/);
  });

  it("plans per value of one knob only: two knobs with several values are refused in one line", () => {
    const r = plan(REPO, {}, "--knob", "stage=a,b", "--knob", "seq=1,2", "--", PYTHON, "train.py");
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toBe("brim: --knob: brim plan plans per value of one knob; stage and seq both have several");
  });
});
