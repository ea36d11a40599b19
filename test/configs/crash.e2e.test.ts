import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { applyConfigEdits, editConfigText, parseConfig } from "../../src/configs/index.ts";
import { scaled } from "../helpers/time.ts";

const root = new URL("../../", import.meta.url).pathname;
const fixture = join(root, "test/configs/fixtures/apply-loop.ts");
const KEY = "section_100.data_loader.precision";

function bigConfig(sections: number): string {
  let text = "# a large config: the file must be either the old or the new one after any crash\n";
  for (let i = 0; i < sections; i++) {
    text += `\nsection_${i}:               # section ${i}\n  data_loader:\n    batch_size: ${i}          # per-device\n    num_workers: 4\n    precision: alpha\n  notes: "padding so that writes take a while ${"x".repeat(60)}"\n`;
  }
  return text;
}

/** Runs the loop, kills it with SIGKILL `delayMs` after it is ready. */
function runAndKill(file: string, delayMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", fixture, file, KEY, "alpha", "beta"], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    let ready = false;
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.on("data", (chunk: Buffer) => {
      if (ready || !chunk.toString().includes("ready")) return;
      ready = true;
      setTimeout(() => child.kill("SIGKILL"), delayMs);
    });
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      if (signal === "SIGKILL") resolve();
      else reject(new Error(`the apply loop ended by itself (code ${code}): ${stderr}`));
    });
  });
}

describe("crash safety", () => {
  it(
    "leaves the old or the new file, whole, whenever the writer is killed",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "brim-crash-"));
      const file = join(dir, "big.yaml");
      const textA = bigConfig(200);
      const textB = editConfigText(parseConfig(textA, "yaml", file), [{ key: KEY, value: "beta" }]).text;
      expect(textB).not.toBe(textA);
      writeFileSync(file, textA);
      let sawTemp = 0;
      for (let round = 0; round < 6; round++) {
        await runAndKill(file, Math.floor(Math.random() * 600));
        const now = readFileSync(file, "utf8");
        expect(now === textA || now === textB, `round ${round}: the file is torn`).toBe(true);
        expect(parseConfig(now, "yaml", file).get(KEY)).toMatch(/^(alpha|beta)$/);
        const names = readdirSync(dir);
        const temps = names.filter((n) => n.startsWith(".big.yaml.brim-tmp-"));
        expect(temps.length, `round ${round}: ${temps.join(", ")}`).toBeLessThanOrEqual(1);
        sawTemp += temps.length;
        for (const backup of names.filter((n) => n.startsWith("big.yaml.brim-backup"))) {
          const content = readFileSync(join(dir, backup), "utf8");
          expect(content === textA || content === textB, `round ${round}: backup ${backup} is torn`).toBe(true);
        }
        expect(names.every((n) => n === "big.yaml" || n.startsWith("big.yaml.brim-backup") || n.startsWith(".big.yaml.brim-tmp-"))).toBe(true);
      }
      const now = readFileSync(file, "utf8");
      await applyConfigEdits(file, [{ key: KEY, value: now === textA ? "beta" : "alpha" }], { backup: false });
      expect(readdirSync(dir).filter((n) => n.startsWith(".big.yaml.brim-tmp-"))).toEqual([]);
      expect(sawTemp).toBeGreaterThanOrEqual(0);
    },
    scaled(120_000),
  );
});
