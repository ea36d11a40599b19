// brim.torch.profile on recurrent models in real PyTorch (CPU): LSTM and GRU profile, and when
// oneDNN cannot build its recurrent primitive (PyTorch 2.11 on some CPUs) the profile falls back
// to PyTorch's native kernels and says so; a profile that cannot be measured says why and what to do.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import type { PlanReport } from "../../src/plan/planner.ts";
import { scaled } from "../helpers/time.ts";

const PYTHON = process.env["BRIM_TEST_PYTHON"] ?? "/usr/bin/python3";
const root = new URL("../../", import.meta.url).pathname;

interface Outcome {
  ok: boolean;
  saved?: Record<string, number>;
  notes?: string[];
  type?: string;
  message?: string;
}

function run(mode: string): Record<"lstm" | "gru", Outcome> {
  return JSON.parse(execFileSync(PYTHON, [join(root, "test/torch/profile_rnn.py"), mode], { encoding: "utf8" })) as Record<"lstm" | "gru", Outcome>;
}

// read from the installed distribution's metadata, not imported (an import of torch costs seconds of CPU)
const torchMajor = Number(execFileSync(PYTHON, ["-c", "import importlib.metadata as m; print(m.version('torch').split('.')[0])"], { encoding: "utf8" }).trim());

describe("brim.torch.profile on LSTM/GRU (real PyTorch, CPU)", () => {
  const plain = run("plain");

  it("profiles both, in fp32 and bf16-mixed", () => {
    for (const kind of ["lstm", "gru"] as const) {
      expect(plain[kind].ok, kind).toBe(true);
      expect(plain[kind].saved!["fp32"]).toBeGreaterThan(0);
      // PyTorch 2.13 on a CPU without bf16 kernels: oneDNN cannot build the bf16 recurrent
      // primitive and the profile falls back, saying so (the fallback's own test is below)
      for (const note of plain[kind].notes ?? []) expect(note).toMatch(/^bf16-mixed: oneDNN failed \(.*\); measured with torch\.backends\.mkldnn disabled$/);
    }
  });

  it("falls back when oneDNN cannot create the recurrent primitive, measures the same bytes, and notes it", () => {
    const failing = run("onednn-fails");
    for (const kind of ["lstm", "gru"] as const) {
      expect(failing[kind].ok, kind).toBe(true);
      // PyTorch 1.13's CPU LSTM/GRU save the same bytes either way; 2.x's oneDNN kernels save about
      // twice what the native ones do (82404 vs 41444 bytes for the fp32 LSTM on 2.13): the fallback
      // measures the native kernels, and says so in its note
      if (torchMajor === 1) expect(failing[kind].saved).toEqual(plain[kind].saved);
      else expect(failing[kind].saved!["fp32"]).toBeGreaterThan(0);
      expect(failing[kind].notes?.[0]).toMatch(
        /^fp32: oneDNN failed \(could not create a primitive descriptor for the (LSTM|GRU) forward propagation primitive\); measured with torch\.backends\.mkldnn disabled$/,
      );
    }
  });

  it(
    "the SDK records each LSTM call, and brim plan counts it as cuDNN keeps it: the example's LSTM plans as its spec does",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "brim-profile-lstm-"));
      const path = join(dir, "lstm.json");
      execFileSync(PYTHON, [join(root, "test/torch/profile_lstm_example.py"), path], { encoding: "utf8" });
      const profile = JSON.parse(readFileSync(path, "utf8")) as {
        per_sample: { saved_bytes: { fp32: number }; recurrent?: { calls: { mode: string; tokens: number; saved_bytes: number }[] } };
      };
      // per sample: one LSTM call over 128 tokens, and nearly all the CPU's saved bytes inside it
      expect(profile.per_sample.recurrent?.calls).toMatchObject([{ mode: "LSTM", tokens: 128, layers: 2, hidden_size: 256 }]);
      expect(profile.per_sample.recurrent!.calls[0]!.saved_bytes / profile.per_sample.saved_bytes.fp32).toBeGreaterThan(0.99);
      const planOf = async (...args: string[]): Promise<PlanReport> => {
        let stdout = "";
        const code = await main(["plan", ...args, "--gpu", "h100-sxm", "--batch", "16", "--precision", "fp32", "--optimizer", "adamw", "--json"], {
          stdout: (t) => void (stdout += t),
          stderr: () => {},
        });
        expect(code).toBe(0);
        return JSON.parse(stdout) as PlanReport;
      };
      const fromProfile = await planOf(path);
      const fromSpec = await planOf(join(root, "examples/lstm-transformer/lstm.yaml"));
      rmSync(dir, { recursive: true, force: true });
      // the CPU kernels saved 2.5× what cuDNN keeps; the plan counts cuDNN's reserve space, its backward and workspace
      expect(fromProfile.memory.components.activations * 2.5).toBeLessThan(profile.per_sample.saved_bytes.fp32 * 16);
      expect(Math.abs(fromProfile.memory.components.activations / fromSpec.memory.components.activations - 1)).toBeLessThan(0.001);
      expect(Math.abs(fromProfile.memory.components.temporaries / fromSpec.memory.components.temporaries - 1)).toBeLessThan(0.001);
      expect(Math.abs(fromProfile.memory.peak_bytes / fromSpec.memory.peak_bytes - 1)).toBeLessThan(0.001);
    },
    scaled(120_000),
  );

  it("a profile that cannot be measured says why and what to do", () => {
    const broken = run("broken");
    expect(broken.lstm.ok).toBe(false);
    expect(broken.lstm.type).toBe("ProfileError");
    expect(broken.lstm.message).toContain("failed on cpu in fp32: RuntimeError: shape mismatch in the user's loss");
    expect(broken.lstm.message).toContain("What to do:");
  });
});
