import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { hasModules } from "../helpers/python.ts";
import { scaled } from "../helpers/time.ts";

// transformers, datasets and accelerate ask `importlib.util.find_spec("torch")` (and "jax") before they
// import it: the attach must still wrap the framework when it really loads (it was blind to the HF
// Trainer's run_clm.py: every step came from its progress bar). Real child processes, the built CLI.
const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-find-spec-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const has = (module: string): boolean => hasModules(PYTHON, module);

function run(name: string, script: string): { steps: number | null; source: string | null; stderr: string } {
  const file = join(root, `${name}.py`);
  writeFileSync(file, script);
  const store = join(root, `store-${name}`);
  const r = spawnSync(process.execPath, [join(REPO, "bin", "brim.js"), "run", "--quiet", "--store", store, "--steps", "6", "--", PYTHON, file], {
    encoding: "utf8",
    timeout: scaled(120_000),
    env: { ...process.env, NO_COLOR: "1" },
  });
  const [id = "?"] = readdirSync(join(store, "runs"));
  const meta = JSON.parse(readFileSync(join(store, "runs", id, "run.json"), "utf8")) as { summary: { steps: number; throughput_source?: string } | null };
  return { steps: meta.summary?.steps ?? null, source: meta.summary?.throughput_source ?? null, stderr: r.stderr };
}

describe("the attach after an availability check (importlib.util.find_spec) of the framework", () => {
  it.skipIf(!has("torch"))(
    "PyTorch: find_spec('torch'), then import torch: the optimizer steps are counted, exactly 6",
    () => {
      const r = run(
        "torch_job",
        `import importlib.util
importlib.util.find_spec("torch")
import torch
m = torch.nn.Linear(4, 1)
o = torch.optim.SGD(m.parameters(), lr=0.1)
for (x,) in torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4096, 4)), batch_size=8):
    o.zero_grad()
    m(x).sum().backward()
    o.step()
`,
      );
      expect([r.steps, r.source], r.stderr).toEqual([6, "attach"]);
    },
    scaled(150_000),
  );

  it.skipIf(!has("jax"))(
    "JAX: find_spec('jax'), then import jax: the jitted gradient step is counted, exactly 6",
    () => {
      const r = run(
        "jax_job",
        `import importlib.util
importlib.util.find_spec("jax")
import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def update(w, batch):
    x, y = batch
    return w - 0.1 * jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)


w = jnp.zeros(4)
data = np.random.default_rng(0).normal(size=(4096, 5)).astype(np.float32)
for i in range(0, 4096, 8):
    w = update(w, (data[i:i + 8, :4], data[i:i + 8, 4]))
`,
      );
      expect([r.steps, r.source], r.stderr).toEqual([6, "attach"]);
    },
    scaled(150_000),
  );
});
