/**
 * The `nvidia-smi` fallback, for machines where the NVML library cannot be loaded but the binary
 * runs (some containers mount only the binary). Pure CSV parsers plus a reader that runs the
 * binary at most about once a second and answers from its latest result in between.
 *
 * @example
 * ```ts
 * const path = findOnPath("nvidia-smi");
 * const opened = path === null ? null : openSmiGpus(path);
 * ```
 * @module
 */
import { execFile, execFileSync } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";
import { decodeThrottleReasons } from "./nvml-structs.ts";
import type { GpuInfo, GpuProcess, GpuReading } from "./types.ts";

/** The GPU fields every nvidia-smi brim supports can answer, in query order. @example parseSmiGpus(stdout, SMI_GPU_FIELDS); */
export const SMI_GPU_FIELDS = [
  "index",
  "name",
  "uuid",
  "driver_version",
  "memory.total",
  "memory.used",
  "utilization.gpu",
  "utilization.memory",
  "power.draw",
  "enforced.power.limit",
  "clocks.sm",
  "clocks.mem",
] as const;

// Newer drivers renamed clocks_throttle_reasons to clocks_event_reasons; compute_cap came with 510.
const OPTIONAL_FIELD_SETS: readonly (readonly string[])[] = [["compute_cap", "clocks_event_reasons.active"], ["clocks_throttle_reasons.active"], []];

const MIB = 2 ** 20;
const execFileAsync = promisify(execFile);

/**
 * One CSV value as nvidia-smi prints it: "[N/A]", "[Not Supported]", "N/A" and other bracketed
 * words (errors, "[Insufficient Permissions]") mean "no value".
 *
 * @example
 * ```ts
 * smiValue(" 42 ");        // "42"
 * smiValue("[N/A]");       // null
 * smiValue("[Not Supported]"); // null
 * ```
 */
export function smiValue(raw: string): string | null {
  const value = raw.trim();
  return value === "" || value === "N/A" || /^\[.*\]$/.test(value) ? null : value;
}

function smiNumber(raw: string | undefined): number | null {
  const value = raw === undefined ? null : smiValue(raw);
  if (value === null) return null;
  const n = Number(value);
  return Number.isFinite(n) ? n : null;
}

/**
 * Splits `--format=csv,noheader,nounits` output into rows of `columns` cells. nvidia-smi does not
 * quote, so a GPU name with a comma spills into extra cells: they are joined back into the cell
 * at `wideColumn`.
 *
 * @example
 * ```ts
 * parseSmiCsv("0, NVIDIA A100, GPU-1\n", 3, 1); // [["0", "NVIDIA A100", "GPU-1"]]
 * ```
 */
export function parseSmiCsv(text: string, columns: number, wideColumn: number): string[][] {
  const rows: string[][] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const cells = line.split(",").map((cell) => cell.trim());
    if (cells.length > columns) {
      const extra = cells.length - columns;
      cells.splice(wideColumn, extra + 1, cells.slice(wideColumn, wideColumn + extra + 1).join(","));
    }
    if (cells.length === columns) rows.push(cells);
  }
  return rows;
}

/**
 * One GPU line of `--query-gpu`.
 *
 * @example
 * ```ts
 * const row: SmiGpuRow = { index: 0, name: "Tesla T4", uuid: "GPU-…", driver: "535.104.05", totalBytes: 16106127360, usedBytes: 0, util: 0, memUtil: 0, powerW: 9.5, powerLimitW: 70, smClockMHz: 300, memClockMHz: 405, computeCapability: "7.5", throttle: ["gpu_idle"], lost: false };
 * ```
 */
export interface SmiGpuRow {
  index: number;
  name: string;
  uuid: string | null;
  driver: string | null;
  totalBytes: number;
  usedBytes: number | null;
  util: number | null;
  memUtil: number | null;
  powerW: number | null;
  powerLimitW: number | null;
  smClockMHz: number | null;
  memClockMHz: number | null;
  computeCapability: string | null;
  throttle: string[] | null;
  lost: boolean;
}

/**
 * Parses `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`; `fields` is the list
 * that was queried, in order. Memory comes in MiB.
 *
 * @example
 * ```ts
 * parseSmiGpus(stdout, [...SMI_GPU_FIELDS]);
 * ```
 */
export function parseSmiGpus(text: string, fields: readonly string[]): SmiGpuRow[] {
  const nameColumn = Math.max(0, fields.indexOf("name"));
  return parseSmiCsv(text, fields.length, nameColumn).map((cells) => {
    const raw = (field: string): string | undefined => {
      const at = fields.indexOf(field);
      return at < 0 ? undefined : cells[at];
    };
    const text = (field: string): string | null => {
      const value = raw(field);
      return value === undefined ? null : smiValue(value);
    };
    const mib = (field: string): number | null => {
      const n = smiNumber(raw(field));
      return n === null ? null : n * MIB;
    };
    const reasons = text("clocks_event_reasons.active") ?? text("clocks_throttle_reasons.active");
    let throttle: string[] | null = null;
    if (reasons !== null && /^0x[0-9a-f]+$/i.test(reasons)) throttle = decodeThrottleReasons(BigInt(reasons));
    return {
      index: smiNumber(raw("index")) ?? 0,
      name: text("name") ?? "NVIDIA GPU",
      uuid: text("uuid"),
      driver: text("driver_version"),
      totalBytes: mib("memory.total") ?? 0,
      usedBytes: mib("memory.used"),
      util: smiNumber(raw("utilization.gpu")),
      memUtil: smiNumber(raw("utilization.memory")),
      powerW: smiNumber(raw("power.draw")),
      powerLimitW: smiNumber(raw("enforced.power.limit")),
      smClockMHz: smiNumber(raw("clocks.sm")),
      memClockMHz: smiNumber(raw("clocks.mem")),
      computeCapability: text("compute_cap"),
      throttle,
      lost: cells.some((cell) => /GPU is lost|requires reset/i.test(cell)),
    };
  });
}

/**
 * Parses `nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits`.
 *
 * @example
 * ```ts
 * parseSmiApps("4242, 1024, GPU-1\n"); // [{ pid: 4242, usedBytes: 1073741824, uuid: "GPU-1" }]
 * ```
 */
export function parseSmiApps(text: string): { pid: number; usedBytes: number | null; uuid: string | null }[] {
  return parseSmiCsv(text, 3, 2)
    .map(([pid = "", used = "", uuid = ""]) => {
      const mib = smiNumber(used);
      return { pid: Number(pid), usedBytes: mib === null ? null : mib * MIB, uuid: smiValue(uuid) };
    })
    .filter((app) => Number.isInteger(app.pid) && app.pid > 0);
}

/**
 * Finds an executable on PATH, the way a shell would; null when there is none.
 *
 * @example
 * ```ts
 * findOnPath("nvidia-smi"); // "/usr/bin/nvidia-smi" or null
 * ```
 */
export function findOnPath(name: string, path: string = process.env.PATH ?? ""): string | null {
  for (const dir of path.split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here.
    }
  }
  return null;
}

/**
 * How {@link openSmiGpus} runs nvidia-smi.
 *
 * @example
 * ```ts
 * openSmiGpus("/usr/bin/nvidia-smi", { minIntervalMs: 2000 });
 * ```
 */
export interface SmiOptions {
  /** Each run of nvidia-smi is given this long (default 10 s). */
  timeoutMs?: number;
  /** nvidia-smi runs at most this often; reads in between answer from the latest run (default 1000). */
  minIntervalMs?: number;
  nowMs?: () => number;
}

/**
 * GPUs read through nvidia-smi, opened.
 *
 * @example
 * ```ts
 * const readings = await smi.read();
 * ```
 */
export interface SmiGpus {
  readonly path: string;
  readonly driver: string | null;
  readonly gpus: GpuInfo[];
  read(): Promise<GpuReading[]>;
  close(): void;
}

function firstLine(error: unknown): string {
  const e = error as { stderr?: string | Buffer; stdout?: string | Buffer; message?: string; code?: string };
  const text = [e.stderr, e.stdout].map((t) => (t === undefined ? "" : String(t).trim())).find((t) => t !== "") ?? e.message ?? String(error);
  return text.split("\n")[0]?.trim() ?? "failed";
}

/** Queries nvidia-smi with the widest set of fields it answers; the rows and the fields, or why none came. */
function firstQuery(path: string, timeout: number): { rows: SmiGpuRow[]; fields: string[] } | { error: string } {
  let lastError = "no output";
  for (const optional of OPTIONAL_FIELD_SETS) {
    const tried = [...SMI_GPU_FIELDS, ...optional];
    try {
      const stdout = execFileSync(path, [`--query-gpu=${tried.join(",")}`, "--format=csv,noheader,nounits"], {
        encoding: "utf8",
        timeout,
        stdio: ["ignore", "pipe", "pipe"],
      });
      return { rows: parseSmiGpus(stdout, tried), fields: tried };
    } catch (error) {
      lastError = firstLine(error);
      if ((error as { code?: string }).code === "ENOENT" || (error as { code?: string }).code === "EACCES") break;
    }
  }
  return { error: `nvidia-smi failed: ${lastError}` };
}

/** A GPU as nvidia-smi listed it, with the features its first answer showed. */
function smiGpuInfo(row: SmiGpuRow): GpuInfo {
  return {
    index: row.index,
    name: row.name,
    uuid: row.uuid,
    totalBytes: row.totalBytes,
    computeCapability: row.computeCapability,
    available: [
      ...(row.util !== null ? (["util"] as const) : []),
      "processes" as const,
      ...(row.powerW !== null ? (["power"] as const) : []),
      ...(row.powerLimitW !== null ? (["power_limit"] as const) : []),
      ...(row.smClockMHz !== null ? (["clocks"] as const) : []),
      ...(row.throttle !== null ? (["throttle"] as const) : []),
    ],
  };
}

/** A reading with nothing measured: before nvidia-smi first answered. */
function emptyReading(gpu: { index: number; totalBytes: number }, lost: boolean, sampledAt: number): GpuReading {
  return {
    index: gpu.index,
    usedBytes: 0,
    totalBytes: gpu.totalBytes,
    reservedBytes: null,
    util: null,
    memUtil: null,
    utilSamples: null,
    smActivity: null,
    smOccupancy: null,
    tensorActivity: null,
    dramBandwidth: null,
    powerW: null,
    powerLimitW: null,
    energyJ: null,
    smClockMHz: null,
    memClockMHz: null,
    throttle: null,
    pcieTxKBs: null,
    pcieRxKBs: null,
    processes: [],
    xids: [],
    lost,
    sampledAt,
  };
}

/** One row of `--query-gpu` and the compute apps on that GPU, as a reading. */
function smiReading(row: SmiGpuRow, apps: ReturnType<typeof parseSmiApps>, lost: boolean, sampledAt: number): GpuReading {
  const processes: GpuProcess[] = apps
    .filter((app) => app.uuid !== null && app.uuid === row.uuid)
    .map((app) => ({ pid: app.pid, usedBytes: app.usedBytes, smUtil: null, memUtil: null }));
  return {
    ...emptyReading(row, lost, sampledAt),
    usedBytes: row.usedBytes ?? 0,
    util: row.util,
    memUtil: row.memUtil,
    powerW: row.powerW,
    powerLimitW: row.powerLimitW,
    smClockMHz: row.smClockMHz,
    memClockMHz: row.memClockMHz,
    throttle: row.throttle,
    processes,
  };
}

/**
 * Runs nvidia-smi once to find the GPUs and the fields this version answers; never throws.
 *
 * @example
 * ```ts
 * const opened = openSmiGpus("/usr/bin/nvidia-smi");
 * if ("error" in opened) console.log(opened.error);
 * ```
 */
export function openSmiGpus(path: string, options: SmiOptions = {}): { gpus: SmiGpus } | { error: string } {
  const timeout = options.timeoutMs ?? 10_000;
  const nowMs = options.nowMs ?? Date.now;
  const minIntervalMs = options.minIntervalMs ?? 1000;
  const first = firstQuery(path, timeout);
  if ("error" in first) return first;
  const { rows, fields } = first;
  if (rows.length === 0) return { error: "nvidia-smi lists no GPU" };

  const gpus = rows.map(smiGpuInfo);
  const controller = new AbortController();
  const run = async (args: string[]): Promise<string> => (await execFileAsync(path, args, { encoding: "utf8", timeout, signal: controller.signal })).stdout;
  const lost = new Set<number>(rows.filter((r) => r.lost).map((r) => r.index));
  let latest: GpuReading[] | null = null;
  let latestAtMs = 0;
  let inFlight: Promise<void> | null = null;

  const refresh = async (): Promise<void> => {
    const startedMs = nowMs();
    try {
      const [gpuText, appText] = await Promise.all([
        run([`--query-gpu=${fields.join(",")}`, "--format=csv,noheader,nounits"]),
        run(["--query-compute-apps=pid,used_memory,gpu_uuid", "--format=csv,noheader,nounits"]),
      ]);
      const apps = parseSmiApps(appText);
      latest = parseSmiGpus(gpuText, fields).map((row) => {
        if (row.lost) lost.add(row.index);
        return smiReading(row, apps, lost.has(row.index), startedMs / 1000);
      });
    } catch (error) {
      if (/GPU is lost|requires reset/i.test(firstLine(error)) || /GPU is lost/i.test(String((error as { stdout?: string }).stdout ?? ""))) {
        for (const gpu of gpus) lost.add(gpu.index);
        latest = (latest ?? []).map((reading) => ({ ...reading, lost: true }));
      }
    }
    latestAtMs = startedMs;
  };

  return {
    gpus: {
      path,
      driver: rows[0]?.driver ?? null,
      gpus,
      async read(): Promise<GpuReading[]> {
        if (latest === null) {
          inFlight ??= refresh().finally(() => (inFlight = null));
          await inFlight;
        } else if (inFlight === null && nowMs() - latestAtMs >= minIntervalMs) {
          inFlight = refresh().finally(() => (inFlight = null));
        }
        return latest ?? gpus.map((gpu) => emptyReading(gpu, lost.has(gpu.index), latestAtMs / 1000));
      },
      close() {
        controller.abort();
      },
    },
  };
}
