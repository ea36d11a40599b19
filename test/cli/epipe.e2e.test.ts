import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

// `brim tune --help | head -1`: the reader leaves before brim has written everything (EPIPE).
const BRIM = join(resolve(import.meta.dirname, "..", ".."), "bin", "brim.js");

describe("a reader that goes away", () => {
  it("does not crash brim with an unhandled EPIPE", () => {
    const result = spawnSync("bash", ["-c", `set -o pipefail; "${process.execPath}" "${BRIM}" tune --help | head -c 10 >/dev/null`], { encoding: "utf8" });
    expect(result.stderr).not.toMatch(/EPIPE|Unhandled 'error' event/);
    expect(result.status).toBe(0);
  });
});
