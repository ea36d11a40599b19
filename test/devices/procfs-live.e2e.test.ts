import { spawn, type ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { ProcFs, createHostReader, createTreeReader } from "../../src/devices/procfs.ts";
import { scaled } from "../helpers/time.ts";

// ProcFs on real processes this test starts (the parsers and made-up roots: procfs.test.ts)
describe("ProcFs on this machine's /proc", () => {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) {
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          // Already gone.
        }
      }
    }
  });

  /** Starts `sh` with two sleeps and a busy node grandchild; resolves with all their pids. */
  function startTree(): Promise<{ root: number; all: number[] }> {
    const script = `sleep 30 & echo $!; sleep 30 & echo $!; ${JSON.stringify(process.execPath)} -e "for(;;){}" & echo $!; wait`;
    const child = spawn("sh", ["-c", script], { detached: true, stdio: ["ignore", "pipe", "inherit"] });
    children.push(child);
    return new Promise((resolve, reject) => {
      let out = "";
      child.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        const pids = out.trim().split("\n").filter(Boolean).map(Number);
        if (pids.length === 3 && child.pid !== undefined) resolve({ root: child.pid, all: [child.pid, ...pids] });
      });
      child.on("error", reject);
    });
  }

  it("finds a real process tree with RSS and CPU use", async () => {
    const { root, all } = await startTree();
    const proc = new ProcFs();
    const trees = createTreeReader(proc);
    const first = trees.read(root);
    expect(new Set(first.pids)).toEqual(new Set(all));
    expect(first.pids[0]).toBe(root);
    expect(first.rssBytes).toBeGreaterThan(0);
    // the busy grandchild's CPU share since the last read: read again until it shows (a busy machine
    // gives it a smaller share, later), up to a scaled limit
    let second = trees.read(root);
    const deadline = Date.now() + scaled(10_000);
    do {
      await new Promise((r) => setTimeout(r, 500));
      second = trees.read(root);
    } while ((second.cpuPercent ?? 0) <= 5 && Date.now() < deadline);
    expect(second.cpuPercent).toBeGreaterThan(5);
    expect(proc.stat(root)?.comm).toBe("sh");
    expect(proc.nsPids(root)?.[0]).toBe(root);
  });

  it("reads the host's memory and CPU", async () => {
    const proc = new ProcFs();
    expect(proc.memInfo()?.memTotalBytes).toBeGreaterThan(2 ** 26);
    const host = createHostReader(proc, () => 0);
    host.read();
    await new Promise((r) => setTimeout(r, 100));
    const reading = host.read();
    expect(reading.memAvailableBytes).toBeGreaterThan(0);
    expect(reading.cpuPercent).toBeGreaterThanOrEqual(0);
    expect(reading.cpuPercent).toBeLessThanOrEqual(100);
  });

  it("gives an empty tree once the root is gone", () => {
    expect(createTreeReader(new ProcFs()).read(2 ** 22 + 12345)).toMatchObject({ pids: [], rssBytes: 0 });
  });
});
