import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { detectCommand, type DetectReport } from "../../src/cli/detect.ts";
import { main } from "../../src/cli/main.ts";
import { renderDetectText } from "../../src/cli/render-detect.ts";
import { openDevices } from "../../src/devices/index.ts";
import { fakeGpu, fakeNvml } from "../devices/fake-nvml.ts";

const root = new URL("../../", import.meta.url).pathname;
const run = promisify(execFile);
const CPU_NOTE = "no NVIDIA GPU found (libnvidia-ml.so.1 not loadable): CPU mode, caps and readings apply to RAM";

async function brim(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await main(argv, { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t) });
  return { code, stdout, stderr };
}

describe("brim detect on this machine (no NVIDIA GPU)", () => {
  it("prints the note line and the host, and exits 0", async () => {
    const { code, stdout, stderr } = await brim("detect", "--no-nvidia-smi");
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe(CPU_NOTE);
    expect(lines[1]).toMatch(/^host +\d+ CPUs.*, RAM [\d.]+ [KMGT]iB, [\d.]+ [KMGT]iB available, CPU \d+% busy$/);
  });

  it("speaks JSON", async () => {
    const { code, stdout } = await brim("detect", "--json", "--no-nvidia-smi");
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as DetectReport;
    expect(report).toMatchObject({ backend: "cpu", note: CPU_NOTE, driver: null, gpus: [] });
    expect(report.host.cpus).toBeGreaterThan(0);
    expect(report.host.mem_total_bytes).toBeGreaterThanOrEqual(report.host.mem_available_bytes);
    expect(report.host.cpu_percent).not.toBeNull();
  });

  it("has help with an example", async () => {
    const { code, stdout } = await brim("detect", "--help");
    expect(code).toBe(0);
    expect(stdout).toMatch(/Usage: brim detect/);
    expect(stdout).toMatch(/Examples:\n  \$ brim detect/);
  });

  it("runs as a real process and exits 0", async () => {
    const script = "import { main } from './src/cli/main.ts'; process.exitCode = await main(['detect', '--no-nvidia-smi']);";
    const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: root });
    expect(stderr).toBe("");
    expect(stdout.split("\n")[0]).toBe(CPU_NOTE);
  });
});

describe("brim detect with a GPU (fake NVML)", () => {
  it("reports the accelerators and renders a table", async () => {
    const driver = fakeNvml([fakeGpu({ reasons: 0x4n, processes: [{ pid: 4242, usedBytes: 2n ** 30n }] })]);
    const report = await detectCommand({ intervalMs: 120 }, () => openDevices({ nvml: driver.api, smiPath: null }));
    expect(report).toMatchObject({ backend: "nvml", note: null, driver: "550.54.15", cuda: "12.4" });
    expect(report.gpus[0]).toMatchObject({
      index: 0,
      name: "NVIDIA H100 80GB HBM3",
      compute_capability: "9.0",
      total_bytes: 85_520_809_984,
      used_bytes: 2_000_000_000,
      util: 97,
      sm_activity: 20.5,
      power_w: 350,
      throttle: ["sw_power_cap"],
      processes: [{ pid: 4242, used_bytes: 2 ** 30 }],
      lost: false,
    });
    expect(report.gpus[0]?.available).toContain("gpm");
    const text = renderDetectText(report);
    expect(text).toMatch(/^backend  nvml · driver 550\.54\.15 · CUDA 12\.4\n/);
    expect(text).toMatch(/\n0 +NVIDIA H100 80GB HBM3 \(sm 9\.0\) +1\.86 GiB \/ 79\.6 GiB +97% +20\.5% +350 W \/ 700 W +1980 MHz +sw_power_cap\n/);
    expect(text).toMatch(/GPU 0: 1 process; readings: util, .*gpm/);
    expect(text).toMatch(/\nhost +\d+ CPUs/);
  });
});
