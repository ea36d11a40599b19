// Set-up file of the `unit` vitest project (vitest.config.ts): a unit test starts no process. Every
// way node:child_process starts one throws here, so a file that does (a real Python job, the built
// CLI, a launcher, a browser) fails in the fast lane with its fix in the message: name it
// *.e2e.test.ts (or *.chromium.test.ts for a browser) and it runs in the `e2e` project instead.
import { createRequire, syncBuiltinESMExports } from "node:module";

const childProcess = createRequire(import.meta.url)("node:child_process") as Record<string, unknown>;
for (const name of ["spawn", "spawnSync", "exec", "execSync", "execFile", "execFileSync", "fork"]) {
  childProcess[name] = (file: unknown): never => {
    const what = typeof file === "string" ? file : "a process";
    throw new Error(`a unit test starts no process (${name} ${what}): name the test file *.e2e.test.ts to run it in the e2e project`);
  };
}
// the named imports (import { spawnSync } from "node:child_process") see the replacements too
syncBuiltinESMExports();
