// The job's output as it comes: chunks with \r progress updates pass through while the job runs, the
// record gets the settled lines, a pseudo-terminal makes the job see a terminal, and the live view
// stays below the output without tearing (checked on an emulated screen).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type * as NodePty from "@lydell/node-pty";
import { afterAll, describe, expect, it } from "vitest";
import type { LiveState } from "../../src/guard/live.ts";
import { StatusFooter } from "../../src/metrics/view.ts";
import { compactPartial, settleLine } from "../../src/job/output-text.ts";
import { Job } from "../../src/job/runner.ts";
import { renderScreen } from "../helpers/screen.ts";

const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const REPO = resolve(import.meta.dirname, "..", "..");
const root = mkdtempSync(join(tmpdir(), "brim-passthrough-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// a tqdm-like bar: \r updates 0.15 s apart, then a newline
const BAR = `import sys, time
for i in range(1, 6):
    sys.stdout.write(f"\\rtrain {i}/5 " + "#" * i)
    sys.stdout.flush()
    time.sleep(0.15)
sys.stdout.write("\\n")
print("isatty", sys.stdout.isatty(), sys.stderr.isatty())
`;

function state(steps: number, total: number): LiveState {
  return {
    elapsedS: 3,
    steps,
    totalSteps: total,
    samplesPerS: 120,
    waitShare: 0.05,
    etaS: null,
    memUsedBytes: 2 ** 30,
    memPeakBytes: 2 ** 30,
    capBytes: null,
    capScope: "ram",
    gpuUtil: null,
    smActivity: null,
    powerW: null,
    cpuPercent: 99,
    processes: 1,
    microBatch: 32,
    accumulation: null,
    loss: 0.5,
    oomRecoveries: 0,
    shrinkRequests: 0,
    lastEvent: null,
  };
}

describe("output text", () => {
  it("settles a \\r-updated line to what it shows and keeps a partial one short", () => {
    expect(settleLine("10%\r50%\r100%\r")).toBe("100%");
    expect(settleLine("plain")).toBe("plain");
    expect(compactPartial("10%\r20%\r30%")).toBe("\r30%");
    expect(settleLine(compactPartial("a\rb\r"))).toBe("b");
  });
});

describe("Job output passthrough (real child processes)", () => {
  it("passes \\r progress updates through while the job runs, one chunk per update; records the settled line", async () => {
    const chunks: { t: number; text: string }[] = [];
    const lines: string[] = [];
    const job = await Job.start({
      command: [PYTHON, "-c", BAR],
      runId: "r",
      onChunk: (_s, text) => chunks.push({ t: Date.now(), text }),
      onOutput: (_s, line) => lines.push(line),
    });
    const result = await job.wait();
    const end = result.endedAt * 1000;
    const updates = chunks.filter((c) => c.text.includes("\rtrain"));
    expect(updates.length).toBeGreaterThanOrEqual(4);
    // the first update came while the job still had ≥ 0.45 s to run: not held until a newline
    expect(end - (updates[0] as { t: number }).t).toBeGreaterThan(450);
    expect(chunks.map((c) => c.text).join("")).toContain("\rtrain 3/5 ###\rtrain 4/5 ####");
    expect(lines).toEqual(["train 5/5 #####", "isatty False False"]);
    expect(result.tail).toEqual(lines);
  });

  it("runs the job on a pseudo-terminal when asked: it sees a terminal, signals and exit codes still work", async () => {
    const chunks: string[] = [];
    const lines: string[] = [];
    const job = await Job.start({
      command: [PYTHON, "-c", BAR],
      runId: "r",
      pty: { columns: 100, rows: 30 },
      onChunk: (s, text) => chunks.push(`${s}:${text}`),
      onOutput: (s, line) => lines.push(`${s}:${line}`),
    });
    const result = await job.wait();
    expect(result.end.cause).toBe("ok");
    expect(lines).toEqual(["1:train 5/5 #####", "1:isatty True True"]);
    expect(chunks.filter((c) => c.includes("\rtrain")).length).toBeGreaterThanOrEqual(4);

    const failed = await (await Job.start({ command: ["sh", "-c", "exit 7"], runId: "r", pty: { columns: 80, rows: 24 } })).wait();
    expect(failed.end.exit_code).toBe(7);

    const sleeper = await Job.start({ command: ["sh", "-c", "echo up; sleep 30"], runId: "r", pty: { columns: 80, rows: 24 }, onOutput: () => {} });
    await new Promise((r) => setTimeout(r, 300));
    sleeper.interrupt("SIGTERM");
    const stopped = await sleeper.wait();
    expect(stopped.end.cause).toBe("interrupted");
    expect(stopped.endedAt - stopped.startedAt).toBeLessThan(10);
  });

  it("falls back to pipes (and its one-line error) when the command is not found", async () => {
    await expect(Job.start({ command: ["brim-no-such-command-xyz"], runId: "r", pty: { columns: 80, rows: 24 } })).rejects.toThrow(/command not found/);
  });
});

describe("StatusFooter with output passing through", () => {
  it("keeps the view below a \\r progress bar on a terminal without tearing", () => {
    let screen = "";
    const footer = new StatusFooter({ write: (t) => (screen += t), isTTY: true, columns: 100 }, { color: false });
    footer.chunk("epoch 1\n");
    footer.update(state(1, 30), 1);
    footer.chunk("\rtrain 1/3 #");
    footer.update(state(2, 30), 2);
    footer.chunk("\rtrain 2/3 ##");
    footer.chunk("\rtrain 3/3 ###");
    footer.update(state(3, 30), 3);
    let rows = renderScreen(screen);
    expect(rows[0]).toBe("epoch 1");
    expect(rows[1]).toBe("train 3/3 ###");
    expect(rows[2]).toMatch(/^brim ▸ step 3\/30 · 120 samples\/s/);
    expect(rows.filter((r) => r.startsWith("brim ▸"))).toHaveLength(1);
    footer.chunk("\ndone\n");
    footer.close(state(30, 30));
    rows = renderScreen(screen);
    expect(rows.slice(0, 3)).toEqual(["epoch 1", "train 3/3 ###", "done"]);
    expect(rows[3]).toMatch(/^brim ▸ step 30\/30 /);
    expect(rows.filter((r) => r.startsWith("brim ▸"))).toHaveLength(1);
  });

  it("writes chunks as they are, and no bar glyphs, when not a terminal", () => {
    let text = "";
    const footer = new StatusFooter({ write: (t) => (text += t), isTTY: false, columns: 100 }, { color: false, everyS: 0 });
    footer.chunk("\rtrain 1/3");
    footer.update({ ...state(1, 3), capBytes: 2 ** 31 }, 1);
    expect(text).toBe("\rtrain 1/3brim: step 1/3 · 120 samples/s · memory 1.00 GiB/2.00 GiB RAM · wait 5%\n");
    expect(text).not.toMatch(/[░█]/);
  });
});

const ptyAvailable = (() => {
  try {
    createRequire(import.meta.url)("@lydell/node-pty");
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!ptyAvailable)("brim run on a terminal (the built CLI under a real pseudo-terminal)", () => {
  it("shows the job's \\r progress as it comes and ends with a frame that agrees with the summary", async () => {
    const pty = createRequire(import.meta.url)("@lydell/node-pty") as typeof NodePty;
    const store = join(root, "store");
    const job = `import sys, time, brim
for i in range(1, 31):
    brim.report_step(samples=8, wait_s=0.001, compute_s=0.02)
    sys.stdout.write(f"\\rstep {i}/30"); sys.stdout.flush()
    time.sleep(0.02)
print()
print("job done")
`;
    const proc = pty.spawn(process.execPath, [join(REPO, "bin", "brim.js"), "run", "--store", store, "--hz", "20", "--", PYTHON, "-c", job], {
      cols: 120,
      rows: 40,
      cwd: root,
      env: { ...process.env, NO_COLOR: "1" },
    });
    let screen = "";
    const seen: { t: number; text: string }[] = [];
    proc.onData((d) => {
      screen += d;
      seen.push({ t: Date.now(), text: d });
    });
    const code = await new Promise<number>((r) => proc.onExit((e) => r(e.exitCode)));
    expect(code).toBe(0);
    const rows = renderScreen(screen, 120);
    expect(rows).toContain("step 30/30");
    expect(rows).toContain("job done");
    const frames = rows.filter((r) => r.startsWith("brim ▸ step"));
    expect(frames).toHaveLength(1);
    expect(frames[0]).toMatch(/^brim ▸ step 30 ·/);
    expect(rows.join("\n")).toMatch(/duration\s+\S+ · 30 steps/);
    expect(screen).not.toMatch(/step 29\/30 ·|░░░/);
    expect(readdirSync(join(store, "runs"))).toHaveLength(1);
    const log = readFileSync(join(store, "runs", readdirSync(join(store, "runs"))[0] as string, "output.log"), "utf8");
    expect(log).toMatch(/step 30\/30/);
  });

  it("resizes the job's pseudo-terminal with brim's own", async () => {
    const pty = createRequire(import.meta.url)("@lydell/node-pty") as typeof NodePty;
    const job = `import shutil, sys, time
print("size", *shutil.get_terminal_size(), flush=True)
time.sleep(1.5)
print("size", *shutil.get_terminal_size(), flush=True)
`;
    const proc = pty.spawn(process.execPath, [join(REPO, "bin", "brim.js"), "run", "--quiet", "--store", join(root, "store-resize"), "--", PYTHON, "-c", job], {
      cols: 120,
      rows: 40,
      cwd: root,
      env: { ...process.env, NO_COLOR: "1" },
    });
    let screen = "";
    proc.onData((d) => {
      screen += d;
      if (screen.includes("size 120 40") && !screen.includes("resized")) {
        screen += "resized";
        proc.resize(90, 30);
      }
    });
    const code = await new Promise<number>((r) => proc.onExit((e) => r(e.exitCode)));
    expect(code).toBe(0);
    expect(screen).toMatch(/size 120 40[\s\S]*size 90 30/);
  });
});
