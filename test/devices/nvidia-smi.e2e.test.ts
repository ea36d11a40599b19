import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openDevices } from "../../src/devices/open.ts";
import { findOnPath, openSmiGpus } from "../../src/devices/nvidia-smi.ts";

describe("nvidia-smi fallback through a fake binary on PATH", () => {
  let dir: string;
  let savedPath: string | undefined;

  // An old driver's nvidia-smi: knows clocks_throttle_reasons but not clocks_event_reasons or compute_cap.
  const SCRIPT = `#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls.log"
case "$1" in
  --query-gpu=*clocks_event_reasons*|--query-gpu=*compute_cap*)
    echo 'Field "clocks_event_reasons.active" is not a valid field to query.' >&2
    exit 2 ;;
  --query-gpu=*)
    echo "0, Tesla T4, GPU-aaaa, 470.82.01, 15360, 2048, 55, 20, 35.10, 70.00, 1590, 5000, 0x0000000000000001"
    echo "1, Tesla T4, GPU-bbbb, 470.82.01, 15360, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A]" ;;
  --query-compute-apps=*)
    echo "\${FAKE_SMI_PID:-1}, 1000, GPU-aaaa"
    echo "999999, 24, GPU-bbbb" ;;
  *) exit 9 ;;
esac
`;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "brim-smi-"));
    writeFileSync(join(dir, "nvidia-smi"), SCRIPT);
    chmodSync(join(dir, "nvidia-smi"), 0o755);
    savedPath = process.env.PATH;
    process.env.PATH = `${dir}${delimiter}${savedPath ?? ""}`;
  });
  afterEach(() => {
    process.env.PATH = savedPath;
  });

  it("finds the binary on PATH", () => {
    expect(findOnPath("nvidia-smi")).toBe(join(dir, "nvidia-smi"));
    expect(findOnPath("nvidia-smi", "/nonexistent")).toBeNull();
  });

  it("is used when NVML cannot be loaded, with one note line", async () => {
    const devices = openDevices({ nvmlLibrary: "/nonexistent/libnvidia-ml.so.1" });
    const inventory = devices.inventory();
    expect(inventory.backend).toBe("nvidia-smi");
    expect(inventory.note).toMatch(/^NVML not usable \(\/nonexistent\/libnvidia-ml\.so\.1 not loadable\); reading GPUs through .*nvidia-smi/);
    expect(inventory.note).not.toContain("\n");
    expect(inventory.driver).toBe("470.82.01");
    expect(inventory.gpus.map((g) => [g.index, g.name, g.uuid, g.totalBytes])).toEqual([
      [0, "Tesla T4", "GPU-aaaa", 15360 * 2 ** 20],
      [1, "Tesla T4", "GPU-bbbb", 15360 * 2 ** 20],
    ]);
    expect(inventory.gpus[0]?.available).toEqual(["util", "processes", "power", "power_limit", "clocks", "throttle"]);

    const reading = await devices.read(null);
    expect(reading.gpus[0]).toMatchObject({ usedBytes: 2048 * 2 ** 20, util: 55, powerW: 35.1, throttle: ["gpu_idle"], smActivity: null, energyJ: null });
    expect(reading.gpus[1]).toMatchObject({ usedBytes: 0, util: null, powerW: null, throttle: null });
    expect(reading.gpus[1]?.processes).toEqual([{ pid: 999999, usedBytes: 24 * 2 ** 20, smUtil: null, memUtil: null }]);
    devices.close();
  });

  it("adds the GPU memory of the tree's processes", async () => {
    process.env.FAKE_SMI_PID = String(process.pid);
    const devices = openDevices({ nvmlLibrary: "/nonexistent/libnvidia-ml.so.1" });
    const reading = await devices.read(process.pid);
    expect(reading.tree?.pids[0]).toBe(process.pid);
    // This process (1000 MiB on GPU 0) is in the tree; pid 999999 on GPU 1 is not.
    expect(reading.tree?.gpuBytes).toBe(1000 * 2 ** 20);
    devices.close();
    delete process.env.FAKE_SMI_PID;
  });

  it("runs nvidia-smi at most once per interval and answers from the latest run in between", async () => {
    let now = 0;
    const smi = openSmiGpus(join(dir, "nvidia-smi"), { nowMs: () => now, minIntervalMs: 1000 });
    if ("error" in smi) throw new Error(smi.error);
    const log = (): string[] => readFileSync(join(dir, "calls.log"), "utf8").trim().split("\n");
    const atOpen = log().length;
    await smi.gpus.read();
    now = 500;
    await smi.gpus.read();
    await smi.gpus.read();
    expect(log().length).toBe(atOpen + 2);
    now = 1500;
    const stale = await smi.gpus.read();
    expect(stale[0]?.sampledAt).toBe(0);
    await new Promise((r) => setTimeout(r, 300));
    expect(log().length).toBe(atOpen + 4);
    expect((await smi.gpus.read())[0]?.sampledAt).toBe(1.5);
    smi.gpus.close();
  });

  it("falls to CPU mode, naming both causes, when nvidia-smi fails too", () => {
    writeFileSync(join(dir, "nvidia-smi"), "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2\nexit 9\n");
    const devices = openDevices({ nvmlLibrary: "/nonexistent/libnvidia-ml.so.1" });
    expect(devices.inventory()).toMatchObject({ backend: "cpu", gpus: [] });
    expect(devices.inventory().note).toBe(
      "no NVIDIA GPU found (/nonexistent/libnvidia-ml.so.1 not loadable; nvidia-smi failed: NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.): CPU mode, caps and readings apply to RAM",
    );
  });
});
