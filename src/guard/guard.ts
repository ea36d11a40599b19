import { join } from "node:path";
import { startSampler, type Devices, type Reading, type Sampler } from "../devices/index.ts";
import type { ChannelMessage } from "../job/channel.ts";
import { Job, type JobResult, type PtySize } from "../job/runner.ts";
import type { RunStore } from "../record/store.ts";
import type { RunWriter } from "../record/writer.ts";
import { summarizeRun } from "../record/summary.ts";
import { loadTimeline, type Timeline } from "../record/timeline/index.ts";
import type { RunDevice, RunMeta, RunSummary, TimelineEntry } from "../record/types.ts";
import { CapWatcher } from "./cap.ts";
import { followEscapes } from "./escapes.ts";
import { channelRefusedEntry, guardFailure, withOomAdvice, withStoreLoss } from "./finish.ts";
import { capEventOf, cappedBytes, isReapingReading, liveReadingOf, peaksAfter, type TreePeaks } from "./reading.ts";
import { forwardSignals } from "./signals.ts";
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
  /** Files the caller removes after the run (config copies with a trial's values): the watchdog removes them when brim is lost. */
  removeOnLoss?: readonly string[];
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
  /**
   * Ends the job now: SIGTERM to its process group, SIGKILL after `graceS`. `done`: the caller has what
   * it ran the job for (a measured trial), so the run ends `ok`, not `hung`.
   */
  stop(detail: string, graceS?: number, done?: boolean): void;
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

/** Everything one guarded run changes as it goes, in one place. */
interface GuardState {
  /** the main process's hello (versions for run.json) */
  mainHello: ChannelMessage | undefined;
  peaks: TreePeaks;
  lastKeptSampleAt: number;
  /** the last reading not yet kept in the timeline (written at the end) */
  pendingSample: Reading | null;
  /** what a handler or a timer does when brim itself fails while guarding (set once the job runs) */
  failGuard: (error: unknown) => void;
}

/** The parts of one guarded run its steps share. */
interface GuardContext {
  options: GuardOptions;
  capScope: "gpu" | "ram";
  writer: RunWriter;
  live: LiveTracker;
  state: GuardState;
  /** `fn`, with a failure in it failing the guard instead of escaping into Node's event loop */
  guarded: <A extends unknown[]>(fn: (...args: A) => void) => (...args: A) => void;
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
  for (const file of options.removeOnLoss ?? []) dog?.removeOnLoss(file);
  const state: GuardState = {
    mainHello: undefined,
    peaks: { gpu: null, rss: null, pss: null },
    lastKeptSampleAt: Number.NEGATIVE_INFINITY,
    pendingSample: null,
    failGuard: () => {},
  };
  const context: GuardContext = {
    options,
    capScope,
    writer,
    state,
    live: new LiveTracker({ startedAt: Date.now() / 1000, capBytes: options.capBytes, capScope, totalSteps: options.stepBudget ?? null }),
    guarded:
      (fn) =>
      (...args) => {
        try {
          fn(...args);
        } catch (error) {
          state.failGuard(error);
        }
      },
  };
  // Registered before the job starts: a signal that arrives while it starts waits for it.
  const signals = forwardSignals(
    { enabled: options.forwardSignals === true, keepOnSupervisorLoss: options.keepOnSupervisorLoss === true },
    (entry) => writer.append(entry),
    context.guarded,
  );
  // a rank that runs out of memory: one smaller micro-batch for every rank of the launcher's next round
  const oomRestart = new OomRestart(join(writer.dir, "knobs.json"), options.knobs ?? {});
  let job: Job;
  try {
    job = await startJob(context, oomRestart, inventory.gpus[0]?.totalBytes ?? null);
  } catch (error) {
    signals.remove();
    await writer.finish({ cause: "crashed", exit_code: null, signal: null, message: (error as Error).message }, null).catch(() => undefined);
    dog?.release();
    throw error;
  }
  dog?.arm(job.pid, job.channel.path);
  state.failGuard = (error) => {
    const failure = guardFailure(error);
    job.stop(failure.reason, failure.detail, 2);
  };
  writer.onFailure((loss) => job.stop("store_failed", loss.error.message, 2));
  writer.append({ t: job.startedAt, kind: "start", pid: job.pid });
  context.live.started(job.startedAt, job.pid);
  context.guarded(() => options.onStart?.({ runId: writer.id, pid: job.pid, dir: writer.dir, control: controlOf(job) }))();
  signals.attach(job);
  let result: JobResult;
  try {
    result = await superviseJob(context, job, deps.devices);
  } finally {
    signals.remove();
  }
  try {
    return await finishRun(context, result, oomRestart, deps.store);
  } finally {
    dog?.release();
  }
}

/** Starts the job, its messages and output going to the record, the live state and the caller. */
function startJob(context: GuardContext, oomRestart: OomRestart, gpuTotalBytes: number | null): Promise<Job> {
  const { options, writer, live, state, guarded } = context;
  return Job.start({
    command: options.command,
    cwd: options.cwd,
    runId: writer.id,
    knobs: options.knobs,
    stepBudget: options.stepBudget,
    warmupSteps: options.warmupSteps,
    gpuCapBytes: context.capScope === "gpu" ? options.capBytes : null,
    gpuTotalBytes,
    hungAfterS: options.hungAfterS,
    rankHangAfterS: options.rankHangAfterS,
    stacksDir: join(writer.dir, "stacks"),
    killGraceS: options.killGraceS,
    env: { BRIM_KNOBS_FILE: join(writer.dir, "knobs.json"), ...options.env },
    pty: options.pty,
    onChunk: options.onChunk === undefined ? undefined : guarded(options.onChunk),
    onBytes: options.onBytes === undefined ? undefined : guarded(options.onBytes),
    onMessage: guarded((message: ChannelMessage) => {
      if (message.type === "hello" && message.role === "main" && state.mainHello === undefined) state.mainHello = message;
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
}

/** What a caller may do to the running job. */
function controlOf(job: Job): RunControl {
  return {
    requestStop: (reason) => void job.requestStop(reason),
    stop: (detail, graceS, done) => job.stop(done === true ? "budget" : "hung", detail, graceS),
    dumpStacks: () => job.dumpStacks(),
  };
}

/**
 * Guards the running job to its end: the time limit, the processes that left its group, the sampler
 * and the cap. Returns how the job ended, its escaped processes dealt with.
 */
async function superviseJob(context: GuardContext, job: Job, devices: Devices): Promise<JobResult> {
  const { options, writer, live, guarded } = context;
  const timers: NodeJS.Timeout[] = [];
  if (options.timeLimitS != null) armTimeLimit(options.timeLimitS, job, guarded, timers);
  // Processes of the job outside its group (double-forked daemons): counted in the tree and the cap.
  const escapes = followEscapes(writer.id, job.pid, (entry) => writer.append(entry));
  timers.push(setInterval(guarded(escapes.look), 1000));
  const leftBehind = { stop: options.leaveDaemons !== true, graceS: Math.min(options.killGraceS ?? 10, 5) };
  let sampler: Sampler | null = null;
  try {
    sampler = startSampler(devices, {
      rootPid: job.pid,
      extraRoots: escapes.roots,
      hz: options.hz ?? 10,
      onReading: guarded(readingHandler(context, job)),
    });
    const result = await escapes.finish(await job.wait(), leftBehind);
    // the last steps arrive after the last reading: one more state, so the final frame agrees with the summary
    options.onState?.(live.snapshot(result.endedAt), result.endedAt);
    return result;
  } catch (error) {
    // brim itself failed mid-run (the sampler could not start): the job must not outlive it
    context.state.failGuard(error);
    return await escapes.finish(await job.wait(), leftBehind);
  } finally {
    for (const timer of timers) clearTimeout(timer);
    await sampler?.stop().catch(() => undefined);
  }
}

/** The time limit: asks the job to stop after `limitS`, stops it 5 s later (both timers join `timers`). */
function armTimeLimit(limitS: number, job: Job, guarded: GuardContext["guarded"], timers: NodeJS.Timeout[]): void {
  const stopLater = guarded(() => job.stop("hung", `the job ran past its time limit of ${limitS} s`, 2));
  const ask = guarded(() => {
    job.requestStop(`time limit of ${limitS} s`);
    timers.push(setTimeout(stopLater, 5000));
  });
  timers.push(setTimeout(ask, limitS * 1000));
}

/** What the guard does with each sampler reading: peaks, live state, the cap, the timeline's samples. */
function readingHandler(context: GuardContext, job: Job): (reading: Reading) => void {
  const { options, writer, live, state } = context;
  const watcher =
    options.capBytes !== null
      ? new CapWatcher({ capBytes: options.capBytes, scope: context.capScope, ...(options.shrinkAt !== undefined ? { shrinkAt: options.shrinkAt } : {}) })
      : null;
  return (reading) => {
    if (isReapingReading(reading)) return;
    state.peaks = peaksAfter(state.peaks, reading);
    const used = cappedBytes(reading, context.capScope);
    live.reading(liveReadingOf(reading, used));
    if (reading.gpus.some((gpu) => gpu.lost)) job.markGpuLost();
    if (watcher !== null && used !== null && job.stoppedBy === null) {
      const action = watcher.observe(used, reading.t, options.shrink !== false && job.channel.stats.open > 0);
      if (action.kind === "shrink" && job.requestShrink(`memory ${used} bytes near the cap ${options.capBytes}`) > 0) {
        live.shrinkRequested();
        writer.append(capEventOf(action, reading.t, options.capBytes));
      } else if (action.kind === "stop") {
        writer.append(capEventOf(action, reading.t, options.capBytes));
        job.stop("cap_exceeded", action.detail, 3);
      }
    }
    state.pendingSample = reading;
    if (reading.t - state.lastKeptSampleAt >= TIMELINE_SAMPLE_EVERY_S) {
      state.lastKeptSampleAt = reading.t;
      const kept = sampleEntryOf(reading);
      writer.append(kept);
      live.sample(kept);
      state.pendingSample = null;
    }
    options.onState?.(live.snapshot(reading.t), reading.t);
  };
}

/** Closes the record: the last sample, the channel's refusals, the end's message, the summary, run.json. */
async function finishRun(context: GuardContext, ended: JobResult, oomRestart: OomRestart, store: RunStore): Promise<GuardResult> {
  const { writer, state } = context;
  if (state.pendingSample !== null) writer.append(sampleEntryOf(state.pendingSample));
  const refused = channelRefusedEntry(ended);
  if (refused !== null) writer.append(refused);
  let result = withOomAdvice(ended, oomRestart.rounds > 0 ? oomRestart.written() : null);
  writer.flush();
  const loss = writer.loss;
  result = withStoreLoss(result, loss);
  const timeline = await loadTimeline(join(writer.dir, "timeline.ndjson"));
  const summary: RunSummary = {
    ...summarizeRun(timeline, { treeGpuBytes: state.peaks.gpu, treeRssBytes: state.peaks.rss }, result.endedAt - result.startedAt),
    peak_tree_pss_bytes: state.peaks.pss,
  };
  if (loss === null) await writer.update({ versions: versionsFrom(state.mainHello) }).catch(() => undefined);
  await writer.finish(result.end, summary, new Date(result.endedAt * 1000));
  const meta = await store.readRunMeta(writer.id);
  return { meta, job: result, summary, timeline: { ...timeline, end: { t: result.endedAt, cause: result.end.cause } } };
}
