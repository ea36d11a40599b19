import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import type { PlanReport } from "../../src/plan/planner.ts";

// brim plan through the built CLI, a real process (the rest of brim plan is tested in-process: plan.test.ts)
const root = new URL("../../", import.meta.url).pathname;
const run = promisify(execFile);

describe("brim plan, the built CLI", () => {
  it("the built CLI runs as a real process: plan, bad input, exit codes", async () => {
    const bin = join(root, "bin/brim.js");
    const ok = await run(process.execPath, [bin, "plan", join(root, "examples/ppo/model.yaml"), "--gpu", "l4", "--json"]);
    expect((JSON.parse(ok.stdout) as PlanReport).model.family).toBe("actor-critic");
    const bad = await run(process.execPath, [bin, "plan", join(root, "examples/ppo/model.yaml"), "--gpu", "nope"]).catch(
      (e: unknown) => e as { code: number; stderr: string },
    );
    expect(bad).toMatchObject({ code: 2 });
    expect((bad as { stderr: string }).stderr).toMatch(/^brim: --gpu: unknown GPU "nope"/);
  });
});
