// Whether a Python has the modules a test file needs, asked without importing them: importing torch
// costs about 3 s of CPU, Lightning about 9, and a file that only decides whether to skip should not
// pay it (the suite's CPU is its time on a 2-core machine). importlib.util.find_spec finds the
// installed package in a few milliseconds; a package that is there but broken fails the test that
// uses it, which says more than a skip would.
import { existsSync } from "node:fs";
import { spawnSync } from "node:child_process";

/**
 * True when `python` runs and every module in `modules` is installed for it.
 *
 * @example
 * ```ts
 * const ready = hasModules(PYTHON, "torch", "lightning");
 * it.skipIf(!ready)("tunes a Lightning job", () => {});
 * ```
 */
export function hasModules(python: string, ...modules: string[]): boolean {
  if (python.includes("/") && !existsSync(python)) return false;
  const script = "import importlib.util, sys\nsys.exit(any(importlib.util.find_spec(m) is None for m in sys.argv[1:]))";
  return spawnSync(python, ["-c", script, ...modules], { stdio: "ignore" }).status === 0;
}
