import { configDefaults, defineConfig } from "vitest/config";
import { scaled } from "./test/helpers/time.ts";

// Three kinds of test, told apart by the file's name (no list to keep):
// - unit: everything else, which starts no process (test/helpers/no-process.ts makes one that does
//   fail, naming this rule); `npm run test:unit` runs them alone, in about a minute.
// - e2e: *.e2e.test.ts, which start real processes (Python jobs, the built CLI, launchers, Prometheus).
// - browser: *.chromium.test.ts, which drive a headless Chromium.
// `npm test` (scripts/test.mjs) runs all three.
const E2E = ["**/*.e2e.test.ts"];
const BROWSER = ["**/*.chromium.test.ts"];
const ALL = ["test/**/*.test.ts", "src/**/*.test.ts"];

export default defineConfig({
  test: {
    // a limit only stops a hung test; it grows with the machine's load (test/helpers/time.ts)
    testTimeout: scaled(60_000),
    hookTimeout: scaled(60_000),
    projects: [
      {
        extends: true,
        // isolate: false: a worker imports src/ once for all its files, not once per file (half the unit
        // project's CPU); no unit test mocks a module or sets the environment, so nothing leaks between files
        test: {
          name: "unit",
          include: ALL,
          exclude: [...configDefaults.exclude, ...E2E, ...BROWSER],
          setupFiles: ["test/helpers/no-process.ts"],
          isolate: false,
        },
      },
      // e2e too: what a file changes in the environment (PATH for a fake nvidia-smi) it puts back
      { extends: true, test: { name: "e2e", include: E2E.map((glob) => `test/${glob}`), isolate: false } },
      { extends: true, test: { name: "browser", include: BROWSER.map((glob) => `test/${glob}`) } },
    ],
  },
});
