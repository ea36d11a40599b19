import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const REPO = resolve(import.meta.dirname, "..", "..");

describe("docs/frameworks.md", () => {
  it("is what scripts/frameworks-table.mjs renders from the committed record", () => {
    const r = spawnSync(process.execPath, [join(REPO, "scripts", "frameworks-table.mjs"), "--check"], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
  });
});
