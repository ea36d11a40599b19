// A real LightningCLI job whose validation set (80 samples) is smaller than its training set (480),
// both loaders built at one line of its data module, with Lightning's sanity check and its tqdm bar:
// the loaders are told apart, the ceiling is the training set's, step 0 counts only training samples,
// and the live view counts what the summary counts (never past the step budget).
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openDevices } from "../../src/devices/index.ts";
import { guardRun } from "../../src/guard/guard.ts";
import { RunStore } from "../../src/record/store.ts";
import { dataLimit, loadersOf } from "../../src/knobs/loaders.ts";
import { scaled } from "../helpers/time.ts";
import { hasModules } from "../helpers/python.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const VENV = join(REPO, ".venv", "bin", "python");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? (existsSync(VENV) ? VENV : "/usr/bin/python3");
const hasLightning = hasModules(PYTHON, "lightning", "torch");
const root = mkdtempSync(join(tmpdir(), "brim-lightning-val-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe.skipIf(!hasLightning)("a LightningCLI job with a validation set smaller than its training set", () => {
  it(
    "takes its ceiling from the training set, counts only training samples at step 0, and never shows more steps than the budget",
    async () => {
      const devices = openDevices({ nvmlLibrary: "/nonexistent/libnvidia-ml.so.1", smiPath: null });
      const liveSteps: number[] = [];
      const result = await guardRun(
        {
          command: [PYTHON, join(REPO, "test", "jobs", "lightning_cli_val.py"), "fit", "--trainer.callbacks", "lightning.pytorch.callbacks.TQDMProgressBar"],
          cwd: root,
          capBytes: null,
          stepBudget: 15,
          warmupSteps: 3,
          hz: 20,
          onState: (state) => liveSteps.push(state.steps),
        },
        { devices, store: new RunStore(join(root, "store")) },
      );
      expect(result.meta.end?.cause).toBe("ok");
      const loaders = loadersOf(result.timeline.events);
      expect(loaders.map((l) => [l.datasetLen, l.use])).toEqual([
        [480, "train"],
        [80, "eval"],
      ]);
      expect(loaders[0]?.where).toBe(loaders[1]?.where);
      expect(loaders[0]?.where).toMatch(/lightning_cli_val\.py:\d+$/);
      expect(dataLimit(loaders, 8)?.samples).toBe(480);
      const attached = result.timeline.steps.filter((step) => step.source === "attach");
      expect(attached).toHaveLength(15);
      expect(attached[0]?.samples).toBe(8);
      expect(attached[0]?.accumulation).toBe(1);
      expect(result.meta.summary?.steps).toBe(15);
      expect(result.meta.summary?.samples).toBe(15 * 8);
      expect(Math.max(...liveSteps)).toBeLessThanOrEqual(15);
      expect(liveSteps.at(-1)).toBe(result.meta.summary?.steps);
    },
    scaled(180_000),
  );
});
