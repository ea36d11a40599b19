// The Lightning and HF Trainer example jobs: where the framework is missing (this VM, CI) they say so
// in one line and exit 0, plainly and under `brim run`; where it is installed (a GPU host with
// Lightning / transformers) they train a few steps and report them through brim's callbacks.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-fw-examples-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// trainedIn: the test that runs the installed example as shipped under `brim run --steps 8` and asserts
// what the one here would (exit 0, the example's "done steps=8" line, brim's "· 8 steps"), on the same
// run it checks for more: a second run of it here would cost one more Lightning process
const JOBS: { folder: string; module: string; tag: string; trainedIn?: string }[] = [
  { folder: "lightning", module: "lightning", tag: "[lightning]", trainedIn: "test/attach/metrics.e2e.test.ts" },
  { folder: "hf-trainer", module: "transformers", tag: "[hf-trainer]" },
];

// found, not imported: Lightning's import alone costs ~9 s of CPU, and the test that runs the example imports it anyway
const installed = (module: string): boolean =>
  spawnSync(PYTHON, ["-c", `import importlib.util, sys; sys.exit(importlib.util.find_spec("${module}") is None)`]).status === 0;

describe.each(JOBS)("examples/$folder", ({ folder, module, tag, trainedIn }) => {
  const train = join(REPO, "examples", folder, "train.py");
  const config = join(REPO, "examples", folder, "config.yaml");
  const has = installed(module);

  it("compiles", () => {
    const r = spawnSync(PYTHON, ["-m", "py_compile", train], { encoding: "utf8", env: { ...process.env, PYTHONPYCACHEPREFIX: join(root, "pycache") } });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  });

  it.skipIf(has)(`skips in one line with exit 0 where ${module} is missing, plainly and under brim run`, () => {
    const plain = spawnSync(PYTHON, [train, "--config", config], { encoding: "utf8" });
    expect(plain.status).toBe(0);
    expect(plain.stderr).toBe("");
    expect(plain.stdout).toBe(`${tag} skipped: ${module === "lightning" ? "Lightning" : "transformers"} is not installed (pip install ${module})\n`);
    const run = spawnSync(process.execPath, [join(REPO, "bin", "brim.js"), "run", "--quiet", "--store", join(root, "store"), "--", PYTHON, train, "--config", config], { encoding: "utf8", env: { ...process.env, NO_COLOR: "1" } });
    expect(run.status).toBe(0);
    expect(run.stdout).toContain(`${tag} skipped:`);
    expect(run.stderr).toMatch(/ended: ok/);
  });

  if (trainedIn === undefined) it.skipIf(!has)(`trains a few steps under brim run and reports them (needs ${module})`, () => {
    const run = spawnSync(process.execPath, [join(REPO, "bin", "brim.js"), "run", "--quiet", "--steps", "8", "--store", join(root, `store-${folder}`), "--", PYTHON, train, "--config", config], { encoding: "utf8", timeout: scaled(300_000), env: { ...process.env, NO_COLOR: "1" } });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^\\${tag} done steps=8 `, "m"));
    expect(run.stderr).toMatch(/· 8 steps/);
  }, scaled(300_000));
});
