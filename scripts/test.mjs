#!/usr/bin/env node
// The project's test command: build, type-check, vitest, then the Python SDK's pytest suite, and a
// closing line "N passed, N failed" summing both (CI reads that line; vitest's own summary it does not).
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const python = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const run = (cmd, args, opts = {}) => spawnSync(cmd, args, { stdio: "inherit", ...opts });
let failedSteps = 0;

for (const [cmd, args] of [
  ["npx", ["tsc", "-p", "tsconfig.build.json"]],
  ["npx", ["tsc", "-p", "tsconfig.json", "--noEmit"]],
]) {
  const r = run(cmd, args);
  if (r.status !== 0) {
    console.error(`test: ${cmd} ${args.join(" ")} failed`);
    process.exit(1);
  }
}

const out = mkdtempSync(join(tmpdir(), "brim-test-"));
const vitestJson = join(out, "vitest.json");
const vitest = run("npx", ["vitest", "run", "--reporter=default", "--reporter=json", `--outputFile.json=${vitestJson}`]);
let passed = 0;
let failed = 0;
if (existsSync(vitestJson)) {
  const report = JSON.parse(readFileSync(vitestJson, "utf8"));
  passed += report.numPassedTests ?? 0;
  // A suite that failed without a failing test (it crashed on import) still counts as one failure.
  const failedTests = report.numFailedTests ?? 0;
  failed += failedTests > 0 ? failedTests : (report.numFailedTestSuites ?? 0);
} else {
  failedSteps++;
}
if (vitest.status !== 0) failedSteps++;

const pyTests = "python/tests";
if (existsSync(pyTests) && readdirSync(pyTests).some((f) => f.startsWith("test_") && f.endsWith(".py"))) {
  const junit = join(out, "pytest.xml");
  const pytest = run(python, ["-m", "pytest", pyTests, "-q", `--junitxml=${junit}`], { env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1" } });
  if (existsSync(junit)) {
    const xml = readFileSync(junit, "utf8");
    const suite = /<testsuite [^>]*>/.exec(xml)?.[0] ?? "";
    const attr = (name) => Number(new RegExp(`${name}="(\\d+)"`).exec(suite)?.[1] ?? 0);
    const bad = attr("failures") + attr("errors");
    passed += attr("tests") - bad - attr("skipped");
    failed += bad;
  } else {
    failedSteps++;
  }
  if (pytest.status !== 0) failedSteps++;
}

console.log(`${passed} passed, ${failed + (failed === 0 ? failedSteps : 0)} failed`);
process.exit(failed > 0 || failedSteps > 0 ? 1 : 0);
