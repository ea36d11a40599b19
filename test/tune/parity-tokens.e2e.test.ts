import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TuneRecord } from "../../src/record/types.ts";
import { scaled } from "../helpers/time.ts";

// The token-averaged loss through a real tune (issue 37's proof): the built CLI, the real Hugging Face
// Trainer on a tiny Llama built from a config (no download), padded sequences of 4 to 32 tokens with
// -100 labels on the padding, your configuration 4 × 4 against the winner 16 × 1 (the effective batch
// held at 16). The model says it takes no loss kwargs (--no-loss-kwargs), so the Trainer passes no
// num_items_in_batch and each micro-batch's loss is its own token mean: the losses part (from step 0 here) and
// the verdict names why. The grid makes 16 × 1 the one candidate and the job waits 15 ms a
// micro-batch, so it is the search's best by construction; PyTorch's threads and the loader workers
// are fixed. Six runs of the job (the baseline, the candidate, two A/B pairs): most of the time is
// each run's import of transformers.
const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const JOB = join(REPO, "test", "jobs", "hf_padded_lm.py");
const root = mkdtempSync(join(tmpdir(), "brim-parity-tokens-e2e-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// torch and transformers installed, found without importing them (the imports alone cost seconds of CPU)
const FIND_TORCH_TRANSFORMERS = "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(n) is None for n in ('torch', 'transformers')))";
const python = [process.env.BRIM_TEST_PYTHON, join(REPO, ".venv", "bin", "python"), "/usr/bin/python3"].find(
  (candidate): candidate is string => candidate !== undefined && existsSync(candidate) && spawnSync(candidate, ["-c", FIND_TORCH_TRANSFORMERS]).status === 0,
);
if (python === undefined) console.warn("skipped: no interpreter with torch and transformers (set BRIM_TEST_PYTHON)");

describe.skipIf(python === undefined)("the token-averaged loss in a real tune's parity verdict", () => {
  it("an HF causal LM on padded variable-length sequences under accumulation: the verdict names the token-averaged loss", { timeout: scaled(600_000) }, () => {
    const store = join(root, "store");
    const argv = ["tune", "--store", store, "--quiet", "--strategy", "grid", "--knob", "batch_size=4,16", "--fix", "num_workers", "--fix", "cpu_threads"];
    const job = [python as string, JOB, "--batch-size", "4", "--accumulation", "4", "--sleep-ms", "15", "--no-loss-kwargs"];
    // --window: the three-step rule of a window given; the verdict is asserted, not how long a trial waits for its noise
    const result = spawnSync(process.execPath, [BRIM, ...argv, "--max-trials", "2", "--steps", "8", "--window", "10s", "--", ...job], {
      cwd: root,
      encoding: "utf8",
      env: { ...process.env, NO_COLOR: "1" },
      timeout: scaled(540_000),
    });
    expect(result.status === 0 || result.status === 3, result.stderr).toBe(true);
    const [id] = readdirSync(join(store, "tunes"));
    const record = JSON.parse(readFileSync(join(store, "tunes", id as string, "tune.json"), "utf8")) as TuneRecord;
    // the closing lines wrap at the terminal's width, their continuation indented by two spaces
    const stdout = result.stdout.replace(/\n {2}/g, " ");
    const parity = record.parity;
    expect(parity, stdout).toBeDefined();
    expect(parity).toMatchObject({ verdict: "parted", effective_batch: { before: 16, after: 16, held: true } });
    expect(record.trials.find((t) => t.index === parity?.winner_trial)?.knobs).toMatchObject({ batch_size: 16, accumulation: 1 });
    expect(parity?.line).toMatch(/^not the same losses: they part at step \d+ .*expected: the loss is token-averaged per micro-batch \(below\)$/);
    expect(parity?.evidence.map((e) => e.kind)).toEqual(["token_loss"]);
    const text = parity?.evidence[0]?.text ?? "";
    expect(text).toMatch(
      /^your loss is token-averaged per micro-batch over a varying number of tokens \(labels with the ignore index -100: \d+ to \d+ tokens a row of 32; the first optimizer step's micro-batches held \d+, \d+, \d+, \d+ tokens in your configuration, \d+ in the winner's \(accumulation 4 and 1\)\)/,
    );
    expect(text).toContain("keep accumulation = 1, or pass num_items_in_batch / sum the loss and divide by the tokens of the whole step");
    expect(stdout).toContain(parity?.line);
    expect(stdout).toContain(text);
  });
});
