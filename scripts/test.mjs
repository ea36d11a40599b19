#!/usr/bin/env node
// The project's test command: build, type-check, vitest, the Python SDK's pytest suite — all on the
// main Python (PyTorch 2.x: the repository's .venv from .ci/venv, or BRIM_TEST_PYTHON) — then a
// smoke job on the oldest supported PyTorch (Debian's 1.13, BRIM_TEST_LEGACY_PYTHON): pytest and a
// few attach tests. The closing line "N passed, N failed" sums them all (CI reads that line; vitest's
// and pytest's own summaries it does not). With BRIM_REQUIRE_FRAMEWORKS=1 (CI) a missing Python
// environment is a failure, not a skip.
import { spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const repo = resolve(import.meta.dirname, "..");
const venv = join(repo, ".venv", "bin", "python");
const python = process.env.BRIM_TEST_PYTHON ?? (existsSync(venv) ? venv : "/usr/bin/python3");
const legacy = process.env.BRIM_TEST_LEGACY_PYTHON ?? "/usr/bin/python3";
const required = process.env.BRIM_REQUIRE_FRAMEWORKS === "1";
const run = (cmd, args, opts = {}) => spawnSync(cmd, args, { stdio: "inherit", ...opts });
const startedAll = Date.now();
let failedSteps = 0;
let passed = 0;
let failed = 0;

/** The Python's release and its frameworks' (from their metadata: nothing heavy is imported). */
function versions(py) {
  const script =
    "import json, sys, importlib.metadata as m\nout = {'python': sys.version.split()[0]}\n" +
    "for n in ('torch', 'lightning', 'transformers', 'accelerate', 'jax', 'optax'):\n" +
    "    try:\n        out[n] = m.version(n)\n    except m.PackageNotFoundError:\n        pass\nprint(json.dumps(out))";
  const r = spawnSync(py, ["-c", script], { encoding: "utf8" });
  if (r.status !== 0) return null;
  const found = JSON.parse(r.stdout);
  // Debian's torch has no metadata under that name on every release: ask torch itself
  if (found.torch === undefined) {
    const t = spawnSync(py, ["-c", "import torch; print(torch.__version__)"], { encoding: "utf8" });
    if (t.status === 0) found.torch = t.stdout.trim();
  }
  return found;
}
const describe = (v) =>
  Object.entries(v)
    .map(([k, x]) => `${k} ${x}`)
    .join(", ");

const main = versions(python);
if (main === null) {
  console.error(`test: ${python} does not run`);
  process.exit(1);
}
console.log(`test: main Python ${python}: ${describe(main)}`);
if (main.torch === undefined || !main.torch.startsWith("2.")) {
  console.log(`test: the main Python has no PyTorch 2.x; bash .ci/venv makes .venv with it and the frameworks`);
  if (required) failedSteps++;
}

// One type-check of everything (src, test, scripts, bench: tsconfig.json, the build's compiler options
// over a superset of its files), and dist/ emitted without checking the same src files again (the
// build's half of the CPU)
for (const [cmd, args] of [
  ["npx", ["tsc", "-p", "tsconfig.build.json", "--noCheck"]],
  ["npx", ["tsc", "-p", "tsconfig.json", "--noEmit"]],
]) {
  const started = Date.now();
  const r = run(cmd, args);
  if (r.status !== 0) {
    console.error(`test: ${cmd} ${args.join(" ")} failed`);
    process.exit(1);
  }
  console.log(`test: ${cmd} ${args.join(" ")} took ${Math.round((Date.now() - started) / 1000)} s`);
}

const out = mkdtempSync(join(tmpdir(), "brim-test-"));

/** Runs vitest with its JSON report (its output passed on as it comes) and adds its counts once it ends. */
function vitest(name, args, env) {
  const json = join(out, `${name}.json`);
  const started = Date.now();
  const child = spawn("npx", ["vitest", "run", "--reporter=default", "--reporter=json", `--outputFile.json=${json}`, ...args], {
    stdio: "inherit",
    env: { ...process.env, ...env },
  });
  return new Promise((done) => {
    child.on("error", () => child.emit("close", 1));
    child.on("close", (code) => {
      if (existsSync(json)) {
        const report = JSON.parse(readFileSync(json, "utf8"));
        passed += report.numPassedTests ?? 0;
        // A suite that failed without a failing test (it crashed on import) still counts as one failure.
        const failedTests = report.numFailedTests ?? 0;
        failed += failedTests > 0 ? failedTests : (report.numFailedTestSuites ?? 0);
      } else failedSteps++;
      if (code !== 0) failedSteps++;
      console.log(`test: ${name} took ${Math.round((Date.now() - started) / 1000)} s`);
      done();
    });
  });
}

/**
 * Starts the SDK's pytest suite on a Python (`extra`: pytest's own options), its output kept in a file;
 * resolves once it ended, with its counts added and its output printed. At once when there is no suite.
 */
function pytest(name, py, extra = []) {
  const pyTests = "python/tests";
  if (!existsSync(pyTests) || !readdirSync(pyTests).some((f) => f.startsWith("test_") && f.endsWith(".py"))) return Promise.resolve();
  const junit = join(out, `${name}.xml`);
  const log = join(out, `${name}.log`);
  const started = Date.now();
  // two test files at a time where pytest-xdist is there (.ci/setup installs it): most tests wait on a
  // job process; a file's tests stay together, as its fixtures expect (--dist loadfile)
  const xdist = spawnSync(py, ["-c", "import xdist"]).status === 0 ? ["-n", "2", "--dist", "loadfile"] : [];
  const fd = openSync(log, "w");
  const child = spawn(py, ["-m", "pytest", pyTests, "-q", ...xdist, ...extra, `--junitxml=${junit}`], {
    stdio: ["ignore", fd, fd],
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1" },
  });
  return new Promise((done) => {
    child.on("error", () => child.emit("close", 1));
    child.on("close", (code) => {
      closeSync(fd);
      process.stdout.write(`test: ${name} (${py}), output:\n${readFileSync(log, "utf8")}`);
      console.log(`test: ${name} took ${Math.round((Date.now() - started) / 1000)} s`);
      if (existsSync(junit)) {
        const xml = readFileSync(junit, "utf8");
        const suite = /<testsuite [^>]*>/.exec(xml)?.[0] ?? "";
        const attr = (n) => Number(new RegExp(`${n}="(\\d+)"`).exec(suite)?.[1] ?? 0);
        const bad = attr("failures") + attr("errors");
        passed += attr("tests") - bad - attr("skipped");
        failed += bad;
      } else failedSteps++;
      if (code !== 0) failedSteps++;
      done();
    });
  });
}

// The oldest supported PyTorch: a smaller job, the SDK's tests that depend on it and a few attach tests.
const old = legacy !== python ? versions(legacy) : null;
if (old?.torch !== undefined) console.log(`test: oldest supported PyTorch, ${legacy}: ${describe(old)}`);
else if (legacy !== python) {
  console.log(`test: smoke job on the oldest PyTorch skipped: ${legacy} has no torch (CI installs Debian's python3-torch 1.13)`);
  if (required) failedSteps++;
}

// The vitest projects of vitest.config.ts, told apart by file name: the unit tests (no process) first,
// then the end-to-end tests (real processes; on 2 cores they wait on their children about half the
// time, so two files at a time) while the pytest suites run beside them (their output printed when
// they end), then the browser tests, one file at a time.
await vitest("vitest-unit", ["--project", "unit", "--maxWorkers=2"], { BRIM_TEST_PYTHON: python });
const pytests = pytest("pytest", python).then(() =>
  // what depends on PyTorch's release: the tests marked any_torch (no torch, stand-ins, the example
  // jobs) ran on the main Python (python/tests/conftest.py)
  old?.torch !== undefined ? pytest("pytest-legacy", legacy, ["-m", "not any_torch"]) : undefined,
);
await vitest("vitest-e2e", ["--project", "e2e", "--maxWorkers=2"], { BRIM_TEST_PYTHON: python });
await pytests;
await vitest("vitest-browser", ["--project", "browser", "--maxWorkers=1"], { BRIM_TEST_PYTHON: python });
// a few attach tests on the oldest PyTorch: a plain loop, loader workers, ranks (the whole file ran on the main Python)
if (old?.torch !== undefined) {
  await vitest("vitest-legacy", ["test/attach/jobs.e2e.test.ts", "-t", "plain_loop\\.py|DataLoader workers|torchrun-style ranks"], {
    BRIM_TEST_PYTHON: legacy,
  });
}

console.log(
  `test: ran on ${describe(main)}${old?.torch !== undefined ? `; smoke job on torch ${old.torch}` : ""}, in ${Math.round((Date.now() - startedAll) / 1000)} s`,
);
console.log(`${passed} passed, ${failed + (failed === 0 ? failedSteps : 0)} failed`);
process.exit(failed > 0 || failedSteps > 0 ? 1 : 0);
