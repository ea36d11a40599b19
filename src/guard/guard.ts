import { join } from "node:path";
import { startSampler, type Devices, type Reading, type Sampler } from "../devices/index.ts";
import type { ChannelMessage } from "../job/channel.ts";
import { Job, type JobResult, type PtySize } from "../job/runner.ts";
import type { RunStore } from "../record/store.ts";
import { summarizeRun } from "../record/summary.ts";
import { loadTimeline, type Timeline } from "../record/timeline/index.ts";
import type { RunDevice, RunMeta, RunSummary, TimelineEntry } from "../record/types.ts";
import { BrimError } from "../errors/index.ts";
import { ioCause } from "../files.ts";
import { CapWatcher } from "./cap.ts";
import { followEscapes } from "./escapes.ts";
import { sampleEntryOf } from "./samples.ts";
import { LiveTracker, type LiveState } from "./live.ts";
import { OomRestart } from "./oom-restart.ts";
import { Watchdog } from "./watchdog.ts";
import { BRIM_VERSION as brimVersion } from "../version.ts";

export { sampleEntryOf } from "./samples.ts";

/** Seconds between two sampler readings kept in the timeline (the guard itself sees every reading). */
const TIMELINE_SAMPLE_EVERY_S = 0.5;

/** One guarded run of a user's command. */
export interface GuardOptions {
  command: string[];
  cwd: string;
  kind?: "run" | "trial";
  tuneId?: string | null;
  /** The memory cap of the whole process tree: GPU memory, or RAM in CPU mode. */
  capBytes: number | null;
  /** Ask the SDK to shrink near the cap (default true). */
  shrink?: boolean;
  /** Share of the cap at which the SDK is asked to shrink (default 0.92). */
  shrinkAt?: number;
  knobs?: Record<string, number | string | boolean>;
  stepBudget?: number | null;
  warmupSteps?: number | null;
  hz?: number;
  hungAfterS?: number | null;
  /** With two or more ranks: seconds with no step on any rank before brim dumps their stacks and ends them (default `hungAfterS`). */
  rankHangAfterS?: number | null;
  killGraceS?: number;
  env?: Record<string, string>;
  /** Seconds after which brim asks the job to stop (SDK), then stops it 5 s later; for tune trials. */
  timeLimitS?: number | null;
  /** Forward SIGINT/SIGTERM that brim receives to the job while it runs, and stop it on SIGHUP (the CLI sets this). */
  forwardSignals?: boolean;
  /**
   * When brim can no longer guard the job (it is killed, crashes, loses its terminal), let the job run
   * on, recorded as unguarded, instead of stopping it (the default). A SIGHUP is then ignored.
   */
  keepOnSupervisorLoss?: boolean;
  /** Leave the job's processes that left its group (daemons) running at the end, named in the record; default: stop them. */
  leaveDaemons?: boolean;
  /** Start the watchdog that stops the job when brim is lost (default true). */
  watchdog?: boolean;
  onOutput?: (stream: 1 | 2, line: string) => void;
  /** The job's output as it comes (see JobOptions.onChunk). */
  onChunk?: (stream: 1 | 2, chunk: string) => void;
  /** The job's output bytes as they come, undecoded (see JobOptions.onBytes). */
  onBytes?: (stream: 1 | 2, bytes: Buffer) => void;
  /** Run the job on a pseudo-terminal of this size (see JobOptions.pty). */
  pty?: PtySize | null;
  onState?: (state: LiveState, now: number) => void;
  onStart?: (info: { runId: string; pid: number; dir: string; control: RunControl }) => void;
  /** Every SDK message as it arrives (the tuner measures its trials from the steps). */
  onMessage?: (message: ChannelMessage) => void;
}

/** What a caller may do to a running job (the tuner ends its trials with it). */
export interface RunControl {
  /** Asks the job to end at its next step boundary (the SDK stops the loop). */
  requestStop(reason: string): void;
  /** Ends the job now: SIGTERM to its process group, SIGKILL after `graceS`. */
  stop(detail: string, graceS?: number): void;
  /** The Python stacks of the job's main processes, dumped into the run's stacks/ folder (where a job that makes no step is stuck). */
  dumpStacks(): Promise<{ file: string | null; top: string | null }[]>;
}

/** What the guard needs from outside. */
export interface GuardDeps {
  devices: Devices;
  store: RunStore;
}

/** The outcome of a guarded run. */
export interface GuardResult {
  meta: RunMeta;
  job: JobResult;
  summary: RunSummary;
  /** the run's timeline, read once (bounded: long lists are thinned) */
  timeline: Timeline;
}

/**
 * The device part of run.json from the devices' inventory.
 *
 * @example
 * ```ts
 * runDevice(devices.inventory()).backend; // "cpu"
 * ```
 */
export function runDevice(inventory: ReturnType<Devices["inventory"]>): RunDevice {
  return {
    backend: inventory.backend,
    driver: inventory.driver,
    gpus: inventory.gpus.map((gpu) => ({ index: gpu.index, name: gpu.name, uuid: gpu.uuid, total_bytes: gpu.totalBytes })),
    host: { cpus: inventory.host.cpus, mem_total_bytes: inventory.host.memTotalBytes },
  };
}

/**
 * An SDK message as a timeline entry (docs/run-store.md), or null for messages the timeline does not keep.
 *
 * @example
 * ```ts
 * timelineEntryOf({ v: 1, type: "event", t: 5, pid: 9, kind: "oom_recovered", step: 3, message: "...", details: {} });
 * // { t: 5, kind: "event", pid: 9, event: "oom_recovered", step: 3, message: "...", details: {} }
 * ```
 */
export function timelineEntryOf(message: ChannelMessage): TimelineEntry | null {
  const { type, ...withVersion } = message;
  const rest: Record<string, unknown> & { t: number } = { ...withVersion };
  delete rest.v;
  if (type === "step" || type === "hello" || type === "profile") return { ...rest, kind: type };
  if (type === "event") {
    const { kind, ...details } = rest;
    return { ...details, kind: "event", event: kind };
  }
  return null;
}

function versionsFrom(hello: ChannelMessage | undefined): Record<string, string> {
  const versions: Record<string, string> = { brim: brimVersion, node: process.version };
  if (hello === undefined) return versions;
  if (typeof hello.python === "string") versions.python = hello.python;
  if (typeof hello.sdk === "string") versions.sdk = hello.sdk;
  if (typeof hello.versions === "object" && hello.versions !== null) {
    for (const [name, value] of Object.entries(hello.versions)) if (typeof value === "string") versions[name] = value;
  }
  return versions;
}

/**
 * Runs a user's command under brim's guard: records it in the run store, samples the devices and
 * the process tree, keeps the tree under the cap (shrink requests to the SDK, then a stop as the last
 * resort), and summarizes the run at the end.
 *
 * @example
 * ```ts
 * const result = await guardRun(
 *   { command: ["python", "train.py"], cwd: process.cwd(), capBytes: 12 * 2 ** 30, forwardSignals: true },
 *   { devices: openDevices(), store: new RunStore(".brim") },
 * );
 * console.log(result.meta.id, result.meta.end?.cause, result.summary.samples_per_s);
 * ```
 */
export async function guardRun(options: GuardOptions, deps: GuardDeps): Promise<GuardResult> {
  const inventory = deps.devices.inventory();
  const capScope = inventory.backend === "cpu" ? "ram" : "gpu";
  const firstGpu = inventory.gpus[0];
  const writer = await deps.store.createRun({
    kind: options.kind ?? "run",
    tune_id: options.tuneId ?? null,
    command: options.command,
    cwd: options.cwd,
    knobs: options.knobs ?? {},
    cap_bytes: options.capBytes,
    cap_scope: capScope,
    step_budget: options.stepBudget ?? null,
    device: runDevice(inventory),
    versions: versionsFrom(undefined),
  });
  const dog =
    options.watchdog === false ? null : Watchdog.start({ runDir: writer.dir, graceS: options.killGraceS ?? 10, keep: options.keepOnSupervisorLoss === true });
  // Set once the job runs: what a handler or a timer does when brim itself fails while guarding.
  let failGuard: (error: unknown) => void = () => {};
  const guarded =
    <A extends unknown[]>(fn: (...args: A) => void) =>
    (...args: A): void => {
      try {
        fn(...args);
      } catch (error) {
        failGuard(error);
      }
    };
  const live = new LiveTracker({ startedAt: Date.now() / 1000, capBytes: options.capBytes, capScope, totalSteps: options.stepBudget ?? null });
  const watcher =
    options.capBytes !== null
      ? new CapWatcher({ capBytes: options.capBytes, scope: capScope, ...(options.shrinkAt !== undefined ? { shrinkAt: options.shrinkAt } : {}) })
      : null;
  let mainHello: ChannelMessage | undefined;
  let peakGpu: number | null = null;
  let peakRss: number | null = null;
  let peakPss: number | null = null;
  let lastKeptSampleAt = Number.NEGATIVE_INFINITY;
  let pendingSample: Reading | null = null;

  // Registered before the job starts: a signal that arrives while it starts waits for it.
  let started: Job | null = null;
  let early: (() => void) | null = null;
  const onSignal = guarded((signal: NodeJS.Signals): void => {
    if (started === null) {
      early = () => onSignal(signal);
      return;
    }
    writer.append({
      t: Date.now() / 1000,
      kind: "event",
      event: "signal_forwarded",
      pid: null,
      step: null,
      message: `brim received ${signal} and passed it to the job`,
      details: { signal },
    });
    started.interrupt(signal);
  });
  const onHangup = guarded((): void => {
    if (started === null) {
      early = () => onHangup();
      return;
    }
    if (options.keepOnSupervisorLoss === true) {
      writer.append({
        t: Date.now() / 1000,
        kind: "event",
        event: "sighup_ignored",
        pid: null,
        step: null,
        message: "brim lost its terminal (SIGHUP) and goes on guarding the job (--keep-on-supervisor-loss)",
        details: {},
      });
      return;
    }
    writer.append({
      t: Date.now() / 1000,
      kind: "event",
      event: "signal_forwarded",
      pid: null,
      step: null,
      message: "brim lost its terminal (SIGHUP): it stops the job rather than leave it unguarded",
      details: { signal: "SIGHUP" },
    });
    started.interrupt("SIGTERM");
  });
  const removeSignalHandlers = (): void => {
    if (!options.forwardSignals) return;
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    process.off("SIGHUP", onHangup);
  };
  if (options.forwardSignals) {
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    process.on("SIGHUP", onHangup);
  }

  // a rank that runs out of memory: one smaller micro-batch for every rank of the launcher's next round
  const knobsFile = join(writer.dir, "knobs.json");
  const oomRestart = new OomRestart(knobsFile, options.knobs ?? {});
  let job: Job;
  try {
    job = await Job.start({
      command: options.command,
      cwd: options.cwd,
      runId: writer.id,
      knobs: options.knobs,
      stepBudget: options.stepBudget,
      warmupSteps: options.warmupSteps,
      gpuCapBytes: capScope === "gpu" ? options.capBytes : null,
      gpuTotalBytes: firstGpu?.totalBytes ?? null,
      hungAfterS: options.hungAfterS,
      rankHangAfterS: options.rankHangAfterS,
      stacksDir: join(writer.dir, "stacks"),
      killGraceS: options.killGraceS,
      env: { BRIM_KNOBS_FILE: knobsFile, ...options.env },
      pty: options.pty,
      onChunk: options.onChunk === undefined ? undefined : guarded(options.onChunk),
      onBytes: options.onBytes === undefined ? undefined : guarded(options.onBytes),
      onMessage: guarded((message: ChannelMessage) => {
        if (message.type === "hello" && message.role === "main" && mainHello === undefined) mainHello = message;
        const entry = timelineEntryOf(message);
        if (entry) writer.append(entry);
        const planned = oomRestart.message(message);
        if (planned) writer.append(planned);
        live.message(message);
        options.onMessage?.(message);
      }),
      onOutput: guarded((stream: 1 | 2, line: string) => {
        writer.appendOutput(stream, line);
        options.onOutput?.(stream, line);
      }),
    });
  } catch (error) {
    removeSignalHandlers();
    await writer.finish({ cause: "crashed", exit_code: null, signal: null, message: (error as Error).message }, null).catch(() => undefined);
    dog?.release();
    throw error;
  }
  dog?.arm(job.pid, job.channel.path);
  failGuard = (error) => {
    const io = error instanceof BrimError ? error.code === "E_IO" : typeof (error as NodeJS.ErrnoException | undefined)?.code === "string";
    const why = error instanceof BrimError ? error.message : ioCause(error);
    if (io) job.stop("store_failed", error instanceof BrimError ? why : `an I/O error while guarding the job: ${why}`, 2);
    else job.stop("guard_failed", `brim's guard failed: ${why}`, 2);
  };
  writer.onFailure((loss) => job.stop("store_failed", loss.error.message, 2));
  writer.append({ t: job.startedAt, kind: "start", pid: job.pid });
  live.started(job.startedAt, job.pid);
  guarded(() =>
    options.onStart?.({
      runId: writer.id,
      pid: job.pid,
      dir: writer.dir,
      control: {
        requestStop: (reason) => void job.requestStop(reason),
        stop: (detail, graceS) => job.stop("hung", detail, graceS),
        dumpStacks: () => job.dumpStacks(),
      },
    }),
  )();
  started = job;
  (early as (() => void) | null)?.();

  const timers: NodeJS.Timeout[] = [];
  if (options.timeLimitS != null) {
    const limit = options.timeLimitS;
    timers.push(
      setTimeout(
        guarded(() => {
          job.requestStop(`time limit of ${limit} s`);
          timers.push(
            setTimeout(
              guarded(() => job.stop("hung", `the job ran past its time limit of ${limit} s`, 2)),
              5000,
            ),
          );
        }),
        limit * 1000,
      ),
    );
  }

  // Processes of the job outside its group (double-forked daemons): counted in the tree and the cap.
  const escapes = followEscapes(writer.id, job.pid, (entry) => writer.append(entry));
  timers.push(setInterval(guarded(escapes.look), 1000));
  const leftBehind = { stop: options.leaveDaemons !== true, graceS: Math.min(options.killGraceS ?? 10, 5) };

  let result: JobResult;
  let sampler: Sampler | null = null;
  try {
    sampler = startSampler(deps.devices, {
      rootPid: job.pid,
      extraRoots: escapes.roots,
      hz: options.hz ?? 10,
      onReading: guarded((reading: Reading) => {
        // A reading taken while the job is being reaped shows its pid with no memory: not a measurement.
        if (reading.tree !== null && reading.tree.rssBytes === 0) return;
        const gpuBytes = reading.tree?.gpuBytes ?? null;
        const rssBytes = reading.tree?.rssBytes ?? null;
        const pssBytes = reading.tree?.pssBytes ?? null;
        if (gpuBytes !== null) peakGpu = Math.max(peakGpu ?? 0, gpuBytes);
        if (rssBytes !== null && (reading.tree?.pids.length ?? 0) > 0) peakRss = Math.max(peakRss ?? 0, rssBytes);
        if (pssBytes !== null && (reading.tree?.pids.length ?? 0) > 0) peakPss = Math.max(peakPss ?? 0, pssBytes);
        // RAM as the OS counts it: PSS (shared pages of forked workers counted once), RSS where PSS is unreadable.
        const used = capScope === "gpu" ? gpuBytes : (pssBytes ?? rssBytes);
        const gpus = reading.gpus;
        const mean = (values: (number | null)[]): number | null => {
          const known = values.filter((value): value is number => value !== null);
          return known.length === 0 ? null : known.reduce((a, b) => a + b, 0) / known.length;
        };
        const powers = gpus.map((gpu) => gpu.powerW).filter((value): value is number => value !== null);
        live.reading({
          t: reading.t,
          usedBytes: used,
          treeGpuBytes: gpuBytes,
          treeRssBytes: rssBytes,
          gpuUtil: mean(gpus.map((gpu) => gpu.util)),
          smActivity: mean(gpus.map((gpu) => gpu.smActivity)),
          powerW: powers.length > 0 ? powers.reduce((a, b) => a + b, 0) : null,
          cpuPercent: reading.tree?.cpuPercent ?? null,
          processes: reading.tree?.pids.length ?? null,
          perGpu: gpus.map((gpu) => ({ index: gpu.index, util: gpu.util, smActivity: gpu.smActivity, powerW: gpu.powerW, usedBytes: gpu.usedBytes })),
        });
        if (gpus.some((gpu) => gpu.lost)) job.markGpuLost();
        if (watcher !== null && used !== null && job.stoppedBy === null) {
          const action = watcher.observe(used, reading.t, options.shrink !== false && job.channel.stats.open > 0);
          if (action.kind === "shrink" && job.requestShrink(`memory ${used} bytes near the cap ${options.capBytes}`) > 0) {
            live.shrinkRequested();
            writer.append({
              t: reading.t,
              kind: "event",
              event: "shrink_requested",
              pid: null,
              step: null,
              message: "near the cap: brim asked the job to shrink its micro-batch",
              details: { used_bytes: used, cap_bytes: options.capBytes },
            });
          } else if (action.kind === "stop") {
            writer.append({
              t: reading.t,
              kind: "event",
              event: "cap_stop",
              pid: null,
              step: null,
              message: action.detail,
              details: { used_bytes: used, cap_bytes: options.capBytes },
            });
            job.stop("cap_exceeded", action.detail, 3);
          }
        }
        pendingSample = reading;
        if (reading.t - lastKeptSampleAt >= TIMELINE_SAMPLE_EVERY_S) {
          lastKeptSampleAt = reading.t;
          const kept = sampleEntryOf(reading);
          writer.append(kept);
          live.sample(kept);
          pendingSample = null;
        }
        options.onState?.(live.snapshot(reading.t), reading.t);
      }),
    });

    result = await job.wait();
    result = await escapes.finish(result, leftBehind);
    // the last steps arrive after the last reading: one more state, so the final frame agrees with the summary
    options.onState?.(live.snapshot(result.endedAt), result.endedAt);
  } catch (error) {
    // brim itself failed mid-run (the sampler could not start): the job must not outlive it
    failGuard(error);
    result = await escapes.finish(await job.wait(), leftBehind);
  } finally {
    for (const timer of timers) clearTimeout(timer);
    await sampler?.stop().catch(() => undefined);
    removeSignalHandlers();
  }
  try {
    const lastSample = pendingSample as Reading | null;
    if (lastSample !== null) writer.append(sampleEntryOf(lastSample));
    const { refused, overflowed, admittedByPid } = result.channel;
    if (refused > 0 || overflowed > 0) {
      const message = `the SDK channel refused ${refused} connection(s) from outside the job and closed ${overflowed} that sent more than it holds`;
      writer.append({
        t: result.endedAt,
        kind: "event",
        event: "channel_refused",
        pid: null,
        step: null,
        message,
        details: { refused, overflowed, admitted_by_pid: admittedByPid },
      });
    }
    const decided = oomRestart.rounds > 0 ? oomRestart.written() : null;
    if (decided !== null && result.end.cause !== "ok") {
      const flags = Object.entries(decided)
        .map(([name, value]) => `--knob ${name}=${String(value)}`)
        .join(" ");
      result = {
        ...result,
        end: {
          ...result.end,
          message: `${result.end.message}; a rank ran out of memory and brim chose for every rank: ${flags} (run again with them, or let the launcher restart the ranks: torchrun --max-restarts 1)`,
        },
      };
    }
    writer.flush();
    const loss = writer.loss;
    if (loss !== null && result.end.cause !== "store_failed") {
      result = { ...result, end: { ...result.end, cause: "store_failed", message: `${loss.error.message}; the record is incomplete` } };
    }
    if (loss !== null) {
      result = {
        ...result,
        end: { ...result.end, message: `${result.end.message} (${loss.entriesLost} timeline entries and ${loss.outputLinesLost} output lines not recorded)` },
      };
    }
    const timeline = await loadTimeline(join(writer.dir, "timeline.ndjson"));
    const summary: RunSummary = {
      ...summarizeRun(timeline, { treeGpuBytes: peakGpu, treeRssBytes: peakRss }, result.endedAt - result.startedAt),
      peak_tree_pss_bytes: peakPss,
    };
    if (loss === null) await writer.update({ versions: versionsFrom(mainHello) }).catch(() => undefined);
    await writer.finish(result.end, summary, new Date(result.endedAt * 1000));
    const meta = await deps.store.readRunMeta(writer.id);
    return { meta, job: result, summary, timeline: { ...timeline, end: { t: result.endedAt, cause: result.end.cause } } };
  } finally {
    dog?.release();
  }
}
