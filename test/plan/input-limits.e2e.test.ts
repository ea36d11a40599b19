// Absurd plan inputs are refused with a one-line cause before any work starts (they used to run
// out of heap after ~50 s): the CLI, through its real entry, exits 2 at once.
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import { scaled } from "../helpers/time.ts";

const root = new URL("../../", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "brim-limits-"));

async function planOf(text: string, name: string): Promise<{ code: number; stderr: string; ms: number }> {
  const file = join(dir, name);
  writeFileSync(file, text);
  let stderr = "";
  const t0 = Date.now();
  const code = await main(["plan", file, "--gpu", "t4"], { stdout: () => {}, stderr: (t) => void (stderr += t) });
  return { code, stderr, ms: Date.now() - t0 };
}

describe("absurd plan inputs", () => {
  it.each([
    [
      "lstm layers",
      "family: lstm\ninput: 4\nhidden: 8\nlayers: 1000000\noutput: 1\nseq_len: 10\n",
      /layers: the model would have 1,000,000 layers\/blocks\/experts; brim plans up to 100,000/,
    ],
    [
      "moe experts",
      "family: transformer-encoder\nvocab: 100\nmax_positions: 16\nd_model: 8\nheads: 2\nffn: 16\nlayers: 2\nseq_len: 8\nmoe: {layers: [1], experts: 2147483648, top_k: 1, ffn: 8}\n",
      /moe\.experts: the model would have 2,147,483,651/,
    ],
    [
      "transformer layers",
      "family: transformer-encoder\nvocab: 100\nmax_positions: 16\nd_model: 8\nheads: 2\nffn: 16\nlayers: 5000000\nseq_len: 8\n",
      /layers: the model would have 5,000,000/,
    ],
    [
      "parameters past 2^53",
      "family: mlp\ninput: 1000000000\nhidden: [1000000000, 1000000000]\noutput: 1000000000\n",
      /3\.00e\+18 parameters: beyond what brim can count exactly/,
    ],
    [
      "HF config layers",
      JSON.stringify({ model_type: "gpt2", n_layer: 10000000, n_embd: 64, n_head: 2, n_positions: 32, vocab_size: 100 }),
      /n_layer: 10,000,000 layers; brim plans up to 100,000/,
    ],
  ])("%s: one line, exit 2, at once", async (_name, text, cause) => {
    const r = await planOf(text, `${_name.replace(/\W/g, "-")}.${text.startsWith("{") ? "json" : "yaml"}`);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(cause);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.ms).toBeLessThan(scaled(2000)); // refused before any work, not after a long one: a hang detector, scaled
  });

  it("the real CLI refuses too", () => {
    const file = join(dir, "cli.yaml");
    writeFileSync(file, "family: lstm\ninput: 4\nhidden: 8\nlayers: 1000000\noutput: 1\nseq_len: 10\n");
    const res = spawnSync(process.execPath, [join(root, "bin/brim.js"), "plan", file, "--gpu", "t4"], { encoding: "utf8", timeout: scaled(30_000) });
    expect(res.status).toBe(2);
    expect(res.stderr.trim().split("\n")).toHaveLength(1);
  });
});
