// A killed `brim plan -- <command>` leaves no config copy behind: the copy that carries a measuring
// run's micro-batch is handed to the run's watchdog, which removes it when brim is lost (SIGKILL
// included), as it stops the job. Real processes through the built CLI (npm test builds dist/ first).
import { spawn } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const BRIM = join(REPO, "bin", "brim.js");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-plan-copies-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: string, ok: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await sleep(200);
  }
}
const copies = (dir: string) => readdirSync(dir).filter((n) => n.includes(".brim-plan-"));
/** A process whose command line names a plan copy: the job a measuring run started on it. */
const onCopy = () =>
  readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .some((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, "utf8").includes(".brim-plan-");
      } catch {
        return false;
      }
    });

describe("brim plan -- <command> killed mid-measure", () => {
  it(
    "SIGKILL while a config copy is in use: the watchdog stops the job and removes the copy; the user's config is untouched",
    { timeout: scaled(300_000) },
    async () => {
      const dir = join(root, "job");
      cpSync(join(REPO, "test", "jobs", "copy_waits.py"), join(dir, "copy_waits.py"), { recursive: true });
      const config = "# our own config\nbatch_size: 16\n";
      writeFileSync(join(dir, "conf.yaml"), config);
      const brim = spawn(process.execPath, [BRIM, "plan", "--store", join(root, "store"), "--", PYTHON, "copy_waits.py", "--config", "conf.yaml"], {
        cwd: dir,
        stdio: ["ignore", "ignore", "pipe"],
      });
      let stderr = "";
      let exited: number | null = null;
      brim.on("exit", (code) => (exited = code ?? -1));
      brim.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      // the second measuring run works on a copy at another micro-batch, where the job waits
      await until(
        "a config copy in use",
        () => {
          if (exited !== null) throw new Error(`brim plan ended (${exited}) before a copy was in use:\n${stderr}`);
          return copies(dir).length === 1 && onCopy();
        },
        scaled(180_000),
      );
      expect(stderr).toMatch(/^brim: measuring the job at micro-batch \d+ for \d+ steps: .*\.conf\.yaml\.brim-plan-/m);
      brim.kill("SIGKILL");
      await until("the copy removed after brim was killed", () => copies(dir).length === 0, scaled(30_000));
      expect(readFileSync(join(dir, "conf.yaml"), "utf8")).toBe(config);
      // the job the copy fed was stopped too
      await until("the job on the copy stopped", () => !onCopy(), scaled(30_000));
    },
  );
});
