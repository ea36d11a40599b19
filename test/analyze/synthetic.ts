/**
 * Synthetic runs for tests, shaped exactly like docs/run-store.md: a `start`, SDK `hello`s and
 * `knob_read` events, sampler readings at 2 Hz, step reports, and an `end`. `syntheticRun` is pure;
 * `writeSyntheticRun` writes the same run through RunStore / RunWriter.
 */
import type { NewRun, RunStore } from "../../src/record/store.ts";
import type { RunWriter } from "../../src/record/writer.ts";
import { measureRun } from "../../src/analyze/measure.ts";
import { readTimeline } from "../../src/record/timeline/index.ts";
import type { RunMeta, TimelineEntry, TuneRecord, TuneTrialRecord } from "../../src/record/types.ts";

export const T0 = 1763780000;
export const GIB = 2 ** 30;

export interface SyntheticOptions {
  id?: string;
  /** null = a CPU run */
  gpu?: { name: string; total_bytes: number } | null;
  steps?: number;
  warmup?: number;
  batch?: number;
  accumulation?: number;
  wait?: (i: number) => number;
  compute?: (i: number) => number;
  /** NVML utilization while waiting / computing */
  utilWait?: number;
  utilCompute?: number;
  sm?: number | null;
  treeGpuBytes?: number | null;
  allocated?: number;
  reserved?: number;
  treeCpu?: number;
  hostCpu?: number;
  cpus?: number;
  rss?: number;
  precision?: string | null;
  workers?: number | null;
  knobsRead?: Record<string, number | string | boolean>;
  throttle?: (i: number) => string[] | null;
  smClock?: (throttled: boolean) => number;
  pcieRxKBs?: number | null;
  gpuPids?: number | null;
  gpuProcesses?: number | null;
  cap?: number | null;
  capScope?: "gpu" | "ram";
  jax?: boolean;
  /** events at a step index */
  events?: { step: number; event: string; message?: string; details: Record<string, unknown> }[];
  earlyGpuBytes?: number;
  command?: string[];
  knobs?: Record<string, number | string | boolean>;
  running?: boolean;
  kind?: "run" | "trial";
  tuneId?: string | null;
  end?: { cause: "ok" | "gpu_oom" | "host_oom" | "crashed"; exit_code: number | null; message: string };
  /** the loss at a step index (default 2.3 - i / 100) */
  loss?: (i: number) => number | null;
}

const MAIN = 4242;

export function syntheticRun(o: SyntheticOptions = {}): { meta: RunMeta; timeline: TimelineEntry[] } {
  const gpu = o.gpu === undefined ? { name: "NVIDIA A100-SXM4-80GB", total_bytes: 80 * GIB } : o.gpu;
  const steps = o.steps ?? 40;
  const warmup = o.warmup ?? 2;
  const batch = o.batch ?? 32;
  const wait = o.wait ?? (() => 0.01);
  const compute = o.compute ?? (() => 0.2);
  const tl: TimelineEntry[] = [{ t: T0, kind: "start", pid: MAIN }];
  tl.push({
    t: T0 + 0.5,
    kind: "hello",
    pid: MAIN,
    ppid: 4200,
    run_id: null,
    rank: null,
    local_rank: null,
    world_size: null,
    role: "main",
    python: "3.11.2",
    sdk: "0.1.0",
    framework: o.jax === true ? "jax" : "torch",
    versions: o.jax === true ? { torch: "2.3.1", jax: "0.4.30" } : { torch: "2.3.1" },
  });
  const knobsRead: Record<string, number | string | boolean> = { ...(o.knobsRead ?? {}) };
  if (o.precision !== null) knobsRead.precision = o.precision ?? "bf16-mixed";
  if (o.workers !== null) knobsRead.num_workers = o.workers ?? 4;
  let t = T0 + 1;
  for (const [name, value] of Object.entries(knobsRead)) {
    tl.push({ t, kind: "event", pid: MAIN, event: "knob_read", step: null, message: null, details: { name, value, default: value, source: "default" } });
    t += 0.01;
  }
  t = T0 + 2;
  const phases: { from: number; to: number; phase: "wait" | "compute"; i: number }[] = [];
  const stepEntries: TimelineEntry[] = [];
  for (let i = 0; i < steps; i++) {
    const w = wait(i);
    const c = compute(i);
    phases.push({ from: t, to: t + w, phase: "wait", i }, { from: t + w, to: t + w + c, phase: "compute", i });
    t += w + c;
    stepEntries.push({
      t,
      kind: "step",
      pid: MAIN,
      step: i,
      samples: batch,
      wait_s: w,
      compute_s: c,
      warmup: i < warmup,
      micro_batch: batch,
      accumulation: o.accumulation ?? 1,
      loss: o.loss ? o.loss(i) : 2.3 - i * 0.01,
      mem:
        gpu === null
          ? { device: "cpu", allocated: null, reserved: null, peak: null, peak_reserved: null, rss: o.rss ?? 2 * GIB, peak_rss: o.rss ?? 2 * GIB }
          : {
              device: "cuda:0",
              allocated: o.allocated ?? 6 * GIB,
              reserved: o.reserved ?? 8 * GIB,
              peak: (o.allocated ?? 6 * GIB) * 1.2,
              peak_reserved: o.reserved ?? 8 * GIB,
              rss: 3 * GIB,
              peak_rss: 3 * GIB,
            },
    });
    for (const e of o.events ?? [])
      if (e.step === i) stepEntries.push({ t: t + 0.001, kind: "event", pid: MAIN, event: e.event, step: i, message: e.message ?? null, details: e.details });
  }
  const end = t + 0.5;
  const samples: TimelineEntry[] = [];
  let k = 0;
  for (let s = T0 + 0.25; s < end; s += 0.5, k++) {
    const phase = phases.find((p) => s >= p.from && s < p.to);
    const throttle = o.throttle !== undefined ? o.throttle(k) : gpu === null ? null : [];
    const throttled = (throttle ?? []).some((r) => r !== "gpu_idle");
    const early = s - T0 < 2;
    samples.push({
      t: s,
      kind: "sample",
      tree: {
        pids: 1 + (o.workers ?? 0),
        rss_bytes: o.rss ?? 2 * GIB,
        cpu_percent: o.treeCpu ?? 100,
        gpu_bytes:
          gpu === null ? null : o.treeGpuBytes === null ? null : early && o.earlyGpuBytes !== undefined ? o.earlyGpuBytes : (o.treeGpuBytes ?? 9 * GIB),
        ...(o.gpuPids !== undefined && o.gpuPids !== null ? { gpu_pids: o.gpuPids } : {}),
      },
      gpus:
        gpu === null
          ? []
          : [
              {
                index: 0,
                used_bytes: (o.treeGpuBytes ?? 9 * GIB) + 200 * 2 ** 20,
                total_bytes: gpu.total_bytes,
                util: phase === undefined ? 0 : phase.phase === "wait" ? (o.utilWait ?? 5) : (o.utilCompute ?? 95),
                mem_util: 40,
                sm_activity: o.sm === undefined ? null : o.sm,
                tensor_activity: null,
                power_w: 250,
                energy_j: 1000 + k,
                sm_clock_mhz: o.smClock?.(throttled) ?? (throttled ? 1200 : 1410),
                throttle,
                pcie_tx_kbs: o.pcieRxKBs === undefined || o.pcieRxKBs === null ? null : 1000,
                pcie_rx_kbs: o.pcieRxKBs ?? null,
                processes: o.gpuProcesses ?? 1,
              },
            ],
      host: { mem_available_bytes: 100 * GIB, cpu_percent: o.hostCpu ?? 30 },
    });
  }
  const timeline = [...tl, ...stepEntries, ...samples].sort((a, b) => a.t - b.t);
  if (o.running !== true) timeline.push({ t: end, kind: "end", cause: o.end?.cause ?? "ok", exit_code: o.end?.exit_code ?? 0, signal: null });
  const meta: RunMeta = {
    schema: "brim.run/v1",
    id: o.id ?? "20251122-030000-0a0a",
    kind: o.kind ?? "run",
    tune_id: o.tuneId ?? null,
    command: o.command ?? ["python", "train.py", "--config", "config.yaml"],
    cwd: "/home/me/proj",
    knobs: o.knobs ?? {},
    cap_bytes: o.cap ?? null,
    cap_scope: o.capScope ?? (gpu === null ? "ram" : "gpu"),
    step_budget: null,
    device: {
      backend: gpu === null ? "cpu" : "nvml",
      driver: gpu === null ? null : "550.54.15",
      gpus: gpu === null ? [] : [{ index: 0, name: gpu.name, uuid: "GPU-0", total_bytes: gpu.total_bytes }],
      host: { cpus: o.cpus ?? 16, mem_total_bytes: 128 * GIB },
    },
    versions: { brim: "0.1.0", node: "v20.20.2" },
    started_at: new Date(T0 * 1000).toISOString(),
    ended_at: o.running === true ? null : new Date(end * 1000).toISOString(),
    end:
      o.running === true ? null : o.end !== undefined ? { ...o.end, signal: null } : { cause: "ok", exit_code: 0, signal: null, message: "finished normally" },
    summary: null,
  };
  return { meta, timeline };
}

/** Writes a synthetic run into a store through RunStore.createRun and RunWriter; a running one keeps its writer open. */
export async function writeSyntheticRun(
  store: RunStore,
  o: SyntheticOptions = {},
  startedAt = new Date(T0 * 1000),
): Promise<{ id: string; writer: RunWriter }> {
  const { meta, timeline } = syntheticRun(o);
  const run: NewRun = {
    kind: meta.kind,
    tune_id: meta.tune_id,
    command: meta.command,
    cwd: meta.cwd,
    knobs: meta.knobs,
    cap_bytes: meta.cap_bytes,
    cap_scope: meta.cap_scope,
    step_budget: meta.step_budget,
    device: meta.device,
    versions: meta.versions,
  };
  const end = meta.end;
  const writer = await store.createRun(run, startedAt);
  for (const entry of timeline) if (entry.kind !== "end") writer.append(entry);
  if (o.running === true) {
    writer.flush();
    return { id: writer.id, writer };
  }
  await writer.finish(
    end ?? { cause: "ok", exit_code: 0, signal: null, message: "finished normally" },
    null,
    new Date((timeline[timeline.length - 1]?.t ?? T0) * 1000),
  );
  return { id: writer.id, writer };
}

export const TUNE_ID = "20251122-020000-7e57";

/**
 * A tune over batch_size × precision with its trial runs: trials at 32…256, the last running out of
 * memory; peak memory 2 GiB + 60 MiB per sample; cap 16 GiB.
 */
export async function writeSyntheticTune(store: RunStore): Promise<{ tune: TuneRecord; runIds: string[] }> {
  const cap = 16 * GIB;
  const perSample = 60 * 2 ** 20;
  const plan: { mb: number; precision: string; oom?: boolean }[] = [
    { mb: 32, precision: "fp32" },
    { mb: 64, precision: "fp32" },
    { mb: 32, precision: "bf16-mixed" },
    { mb: 64, precision: "bf16-mixed" },
    { mb: 128, precision: "bf16-mixed" },
    { mb: 256, precision: "bf16-mixed", oom: true },
  ];
  const trials: TuneTrialRecord[] = [];
  const runIds: string[] = [];
  for (const [index, p] of plan.entries()) {
    const speed = p.precision === "fp32" ? 1 : 2.2;
    const peak = 2 * GIB + perSample * p.mb;
    const options: SyntheticOptions = {
      kind: "trial",
      tuneId: TUNE_ID,
      batch: p.mb,
      steps: p.oom === true ? 3 : 12,
      compute: () => (0.02 + p.mb * 0.002) / speed,
      precision: p.precision,
      knobs: { batch_size: p.mb, precision: p.precision },
      treeGpuBytes: peak,
      reserved: peak - GIB,
      cap,
      ...(p.oom === true ? { end: { cause: "gpu_oom" as const, exit_code: 1, message: "CUDA out of memory" } } : {}),
    };
    const { id } = await writeSyntheticRun(store, options, new Date((T0 + 60 * index) * 1000));
    runIds.push(id);
    const { meta, timeline } = await store.readRun(id);
    const m = measureRun(meta, readTimeline(timeline));
    trials.push({
      index,
      run_id: id,
      knobs: { batch_size: p.mb, precision: p.precision },
      purpose: index === 0 ? "baseline" : "search",
      end: p.oom === true ? "gpu_oom" : "ok",
      samples_per_s: p.oom === true ? null : m.samples_per_s,
      peak_bytes: p.oom === true ? null : peak,
      framework_peak_bytes: p.oom === true ? null : peak - 2 * GIB,
      gpu_util_mean: m.gpu_util_mean,
      data_wait_share: m.data_wait_share,
      duration_s: m.duration_s ?? 0,
      oom_recoveries: 0,
    });
  }
  const best = trials.filter((t) => t.samples_per_s !== null).sort((a, b) => (b.samples_per_s ?? 0) - (a.samples_per_s ?? 0))[0] as TuneTrialRecord;
  const tune: TuneRecord = {
    schema: "brim.tune/v1",
    id: TUNE_ID,
    command: ["python", "train.py", "--config", "config.yaml"],
    cwd: "/home/me/proj",
    bindings: [
      { knob: "batch_size", via: "config", file: "config.yaml", key: "data_loader.batch_size", file_sha256: "00" },
      { knob: "precision", via: "config", file: "config.yaml", key: "training.precision", file_sha256: "00" },
    ],
    cap_bytes: cap,
    cap_scope: "gpu",
    effective_batch: null,
    started_at: new Date(T0 * 1000).toISOString(),
    ended_at: new Date((T0 + 400) * 1000).toISOString(),
    trials,
    winner: { index: best.index, knobs: best.knobs, speedup: (best.samples_per_s ?? 0) / (trials[0]?.samples_per_s ?? 1) },
    stop_reason: "converged",
    memory_line: {
      intercept_bytes: 2 * GIB,
      bytes_per_sample: perSample,
      margin_bytes: 1.6 * GIB,
      predicted_max_micro_batch: Math.floor((cap - 1.6 * GIB - 2 * GIB) / perSample),
    },
    notes: [],
  };
  await store.writeTune(tune);
  return { tune, runIds };
}
