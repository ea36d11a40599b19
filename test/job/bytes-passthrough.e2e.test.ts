// `brim run` passes the job's output through byte for byte where it is not a terminal (binary piped through brim).
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { noteOutcome } from "../helpers/outcomes.ts";
import { REPO } from "../reliability/faults.ts";
import { scaled } from "../helpers/time.ts";

const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-bytes-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("brim run's output pass-through", () => {
  it(
    "all 256 byte values, invalid UTF-8 and characters split across writes, on stdout and stderr, unchanged",
    () => {
      const job = [
        "import sys, time",
        "for out in (sys.stdout.buffer, sys.stderr.buffer):",
        "    out.write(bytes(range(256)) * 3 + b'\\xff\\xfe\\xe2\\x82'); out.flush(); time.sleep(0.05)",
        "    out.write(b'\\xac end\\n'); out.flush()",
      ].join("\n");
      const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const want = Buffer.concat([every, every, every, Buffer.from([0xff, 0xfe, 0xe2, 0x82, 0xac]), Buffer.from(" end\n")]);
      const r = spawnSync(
        process.execPath,
        ["--import", "tsx", join(REPO, "test", "dashboard", "cli-fixture.ts"), "run", "--quiet", "--store", join(root, "store"), "--", PYTHON, "-c", job],
        { cwd: REPO, encoding: "buffer", timeout: scaled(60_000) },
      );
      let differ = 0;
      for (let i = 0; i < want.length; i++) if (r.stdout[i] !== want[i]) differ++;
      noteOutcome(
        "bytes through brim run's stdout (all 256 values ×3, invalid UTF-8, a split character): bytes changed",
        want.length,
        differ + Math.abs(r.stdout.length - want.length),
        "test/job/bytes-passthrough.e2e.test.ts",
      );
      expect(r.status, r.stderr.toString()).toBe(0);
      expect(Buffer.compare(r.stdout, want)).toBe(0);
      // stderr: the job's bytes, with brim's own lines (text) around them
      expect(r.stderr.includes(want)).toBe(true);
    },
    scaled(60_000),
  );
});
