import { Option, type Command } from "commander";
import { hostname, constants as osConstants } from "node:os";
import type { RunEnd } from "../record/types.ts";
import { formatBytes, parseByteSize } from "../bytes.ts";
import { openDevices, type Devices } from "../devices/index.ts";
import { UsageError } from "../errors/index.ts";
import { guardRun } from "../guard/guard.ts";
import { clusterLabels, formatPrometheus, parseListen, serveMetrics, StatusFooter, withRanksNode } from "../metrics/index.ts";
import { progressPattern } from "../job/progress-lines.ts";
import { RunStore, storeRoot } from "../record/store.ts";
import { BRIM_VERSION } from "../version.ts";
import { labelOptions, recordLabels } from "./labels.ts";
import type { Output } from "./output.ts";
import { renderRunSummary, type RunCommandResult } from "./render-run.ts";

/** Options of `brim run` as the command line gives them. */
export interface RunCommandOptions {
  cap?: number;
  store?: string;
  /** a port on 127.0.0.1, or where to listen (`--prometheus [host:]port`) */
  prometheus?: number | { host: string; port: number };
  /** the bearer token scrapes must send; required to listen beyond loopback */
  prometheusToken?: string;
  /** Seconds the metrics endpoint stays up after the run (0 = close at once). */
  /** Seconds /metrics stays up after the run (default 5; callers other than the CLI may leave it out). */
  prometheusGrace?: number;
  hz: number;
  hungAfter: number;
  /** --hang-after: with 2+ ranks, seconds with no step on any rank (0 = --hung-after); callers other than the CLI may leave it out. */
  hangAfter?: number;
  grace: number;
  steps?: number;
  warmup: number;
  knob?: Record<string, number | string | boolean>;
  shrink: boolean;
  json?: boolean;
  quiet?: boolean;
  keepOnSupervisorLoss?: boolean;
  /** --leave-daemons: processes the job started outside its group run on after it (named in the record). */
  leaveDaemons?: boolean;
  /** false with --no-attach. */
  attach?: boolean;
  progressPattern?: string;
  /** --name: kept in run.json, and the `job` label of the metrics */
  name?: string;
  /** --tag key=value, repeatable */
  tag?: Record<string, string>;
}

export type { RunCommandResult } from "./render-run.ts";

/** Exit status of a run that brim stopped because the run store failed (BSD's EX_IOERR). */
export const EXIT_STORE_FAILED = 74;
/** Exit status of a run that brim stopped because its own guard failed (BSD's EX_SOFTWARE). */
export const EXIT_GUARD_FAILED = 70;

/**
 * The exit status brim gives for a run: the job's own, 128 + the signal's number when it was killed,
 * and never 0 when the run did not end `ok` (a job that exits 0 after brim stopped it still failed);
 * {@link EXIT_STORE_FAILED} when the store failed, {@link EXIT_GUARD_FAILED} when the guard did. A run
 * the user interrupted exits 128 + the number of the signal brim received (Ctrl-C: 130), whatever
 * the job made of it: torchrun, for one, exits 1 when its ranks are interrupted.
 *
 * @example
 * ```ts
 * exitCodeOf({ cause: "ok", exit_code: 0, signal: null, message: "" }); // 0
 * exitCodeOf({ cause: "interrupted", exit_code: null, signal: "SIGINT", message: "" }); // 130
 * exitCodeOf({ cause: "interrupted", exit_code: 1, signal: null, message: "" }, "SIGINT"); // 130
 * ```
 */
export function exitCodeOf(end: RunEnd, interruptedBy: NodeJS.Signals | null = null): number {
  if (end.cause === "store_failed") return EXIT_STORE_FAILED;
  if (end.cause === "supervisor_lost") return EXIT_GUARD_FAILED;
  const signalCode = (signal: string): number => 128 + ((osConstants.signals as Record<string, number>)[signal] ?? 1);
  if (end.cause === "interrupted" && interruptedBy !== null) return signalCode(interruptedBy);
  const code = end.exit_code ?? (end.signal !== null ? signalCode(end.signal) : 1);
  if (end.cause === "ok") return 0; // also a job brim ended at its step budget (progress lines) with a signal
  if (code !== 0) return code;
  return end.cause === "interrupted" ? 130 : 1;
}

/**
 * Parses `name=value` knob arguments; numbers and booleans become numbers and booleans.
 *
 * @example
 * ```ts
 * parseKnobArgument("batch_size=64", {}); // { batch_size: 64 }
 * ```
 */
export function parseKnobArgument(text: string, previous: Record<string, number | string | boolean> = {}): Record<string, number | string | boolean> {
  const equals = text.indexOf("=");
  if (equals <= 0) throw new UsageError(`--knob expects name=value, got '${text}'`);
  const name = text.slice(0, equals).trim();
  return { ...previous, [name]: parseScalar(text.slice(equals + 1).trim()) };
}

/**
 * `--knob name=v1,v2,...` (tune's values to try, plan's stages) as commander's parser: repeatable.
 *
 * @example
 * ```ts
 * knobList("batch_size=32,64", {}); // { batch_size: [32, 64] }
 * ```
 */
export function knobList(text: string, previous: Record<string, (number | string | boolean)[]> = {}): Record<string, (number | string | boolean)[]> {
  const equals = text.indexOf("=");
  const values = text
    .slice(equals + 1)
    .split(",")
    .map((v) => v.trim())
    .filter((v) => v !== "");
  if (equals <= 0 || values.length === 0) throw new UsageError(`--knob expects name=v1,v2,... got '${text}'`);
  return { ...previous, [text.slice(0, equals).trim()]: values.map(parseScalar) };
}

/**
 * A command-line value as a number, boolean or string.
 *
 * @example
 * ```ts
 * parseScalar("0.5"); // 0.5
 * parseScalar("true"); // true
 * parseScalar("bf16-mixed"); // "bf16-mixed"
 * ```
 */
export function parseScalar(text: string): number | string | boolean {
  if (text === "true") return true;
  if (text === "false") return false;
  if (/^-?(\d+\.?\d*|\.\d+)(e-?\d+)?$/i.test(text)) return Number(text);
  return text;
}

function positiveInteger(name: string, min = 1): (text: string) => number {
  return (text) => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < min) throw new UsageError(`${name} must be an integer ≥ ${min}, got '${text}'`);
    return value;
  };
}

function positiveNumber(name: string): (text: string) => number {
  return (text) => {
    const value = Number(text);
    if (!Number.isFinite(value) || value <= 0) throw new UsageError(`${name} must be a positive number, got '${text}'`);
    return value;
  };
}

/**
 * The job's environment switches from `--no-attach` and `--progress-pattern` (docs/attach.md).
 *
 * @example
 * ```ts
 * jobSwitches({ attach: false }); // { BRIM_ATTACH: "0" }
 * ```
 */
export function jobSwitches(options: { attach?: boolean; progressPattern?: string }): Record<string, string> {
  return {
    ...(options.attach === false ? { BRIM_ATTACH: "0" } : {}),
    ...(options.progressPattern !== undefined ? { BRIM_PROGRESS_PATTERN: options.progressPattern } : {}),
  };
}

/** The options' own mistakes, each a one-line cause: a bad progress pattern, a cap over the GPU. */
function checkRunInput(options: RunCommandOptions, inventory: ReturnType<Devices["inventory"]>): void {
  if (options.progressPattern !== undefined) {
    try {
      progressPattern(options.progressPattern);
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
  }
  const firstGpu = inventory.gpus[0];
  if (options.cap !== undefined && inventory.backend !== "cpu" && firstGpu !== undefined && options.cap > firstGpu.totalBytes) {
    throw new UsageError(`--cap ${formatBytes(options.cap)} is more than the GPU's ${formatBytes(firstGpu.totalBytes)} (${firstGpu.name})`);
  }
}

/** The live status line under the job's output, on stderr; none with --quiet or --json. */
function statusFooter(options: RunCommandOptions, out: Output, written: (stream: 1 | 2, text: string) => void): StatusFooter | null {
  if (options.quiet || options.json) return null;
  return new StatusFooter(
    {
      write: (text) => {
        out.stderr(text);
        written(2, text);
      },
      isTTY: out.stderrIsTTY === true,
      // read at each redraw: the view follows a resized terminal
      get columns() {
        return out.columns ?? 100;
      },
    },
    { color: out.color === true },
  );
}

/**
 * `brim run`: runs the command under the guard and returns the run with the exit status to give.
 * Printing the live view and the summary goes through `out`; nothing here exits the process.
 *
 * @example
 * ```ts
 * const { result, exitCode } = await runCommand(["python", "train.py"], { hz: 10, hungAfter: 900, grace: 10, prometheusGrace: 5, warmup: 3, knob: {}, shrink: true }, processOutput);
 * ```
 */
export async function runCommand(command: string[], options: RunCommandOptions, out: Output, devices: Devices = openDevices()): Promise<RunCommandResult> {
  if (command.length === 0) throw new UsageError("no command to run: put it after --, e.g. brim run --cap 12GiB -- python train.py");
  const inventory = devices.inventory();
  checkRunInput(options, inventory);
  const root = storeRoot(options.store, process.env, process.cwd());
  const store = new RunStore(root, undefined, recordLabels(options));
  if (inventory.note !== null && !options.json) out.stderr(`brim: ${inventory.note}\n`);
  // A lost terminal (SIGHUP, a closed ssh session) makes writes fail with EIO or EPIPE: the guard
  // goes on (and stops the job) without a screen rather than die of an unhandled stream error.
  for (const stream of [process.stdout, process.stderr]) if (stream.listenerCount("error") === 0) stream.on("error", () => {});
  // A stream that is not a terminal (a pipe, a file) gets the job's bytes unchanged, whatever their encoding.
  const rawBytes = (stream: 1 | 2): boolean => out.bytes !== undefined && (stream === 1 ? out.stdoutIsTTY : out.stderrIsTTY) !== true;
  // where each stream's last line stands, so that the summary never starts glued to a progress bar's last update
  const open = { 1: false, 2: false };
  const written = (stream: 1 | 2, text: string): void => {
    if (text === "") return;
    open[stream] = !text.endsWith("\n");
    if (out.sameTarget === true) open[stream === 1 ? 2 : 1] = open[stream];
  };
  const footer = statusFooter(options, out, written);
  let latestState: Parameters<typeof formatPrometheus>[0] | null = null;
  let runId = "";
  let running = true;
  const build = {
    version: BRIM_VERSION,
    nodejs: process.version,
    backend: inventory.backend,
    ...(inventory.driver != null ? { driver: inventory.driver } : {}),
  };
  const gpus = inventory.backend === "cpu" ? [] : inventory.gpus.map((gpu) => gpu.index);
  const listen = typeof options.prometheus === "number" ? { host: "127.0.0.1", port: options.prometheus } : options.prometheus;
  const context = { gpus, build, gpuInfo: inventory.backend === "cpu" ? [] : inventory.gpus, hostname: hostname() };
  // job/node/rank from the launcher's environment, else the node its ranks were given: one Prometheus sums a job over its nodes
  const seriesLabels = (): Record<string, string> => ({
    run_id: runId,
    ...withRanksNode(clusterLabels(process.env, options.name), latestState?.ranks ?? []),
  });
  const token = options.prometheusToken ?? process.env.BRIM_PROMETHEUS_TOKEN ?? null;
  const metrics =
    listen !== undefined
      ? await serveMetrics(listen.port, () => (latestState ? formatPrometheus(latestState, seriesLabels(), { ...context, running }) : ""), listen.host, token)
      : null;
  let ended = false;
  try {
    const result = await guardRun(
      {
        command,
        cwd: process.cwd(),
        capBytes: options.cap ?? null,
        shrink: options.shrink,
        knobs: options.knob ?? {},
        stepBudget: options.steps ?? null,
        warmupSteps: options.warmup,
        hz: options.hz,
        env: jobSwitches(options),
        hungAfterS: options.hungAfter > 0 ? options.hungAfter : null,
        rankHangAfterS: options.hangAfter !== undefined && options.hangAfter > 0 ? options.hangAfter : null,
        killGraceS: options.grace,
        forwardSignals: true,
        keepOnSupervisorLoss: options.keepOnSupervisorLoss === true,
        leaveDaemons: options.leaveDaemons === true,
        onStart: ({ runId: id, pid }) => {
          runId = id;
          if (!options.json)
            out.stderr(
              `brim: run ${id} · pid ${pid}${options.cap !== undefined ? ` · cap ${formatBytes(options.cap)} ${inventory.backend === "cpu" ? "RAM" : "GPU"}` : ""}${metrics && listen ? ` · metrics http://${listen.host.includes(":") ? `[${listen.host}]` : listen.host}:${listen.port}/metrics` : ""}\n`,
            );
        },
        // the job's output passes through as it comes (\r progress updates included); on a terminal
        // it runs on a pseudo-terminal of its own so it prints as it would in the shell
        pty:
          options.json !== true && out.stderrIsTTY === true && out.stdoutIsTTY === true
            ? { columns: out.columns ?? 100, rows: out.rows ?? 24, current: () => ({ columns: out.columns ?? 100, rows: out.rows ?? 24 }) }
            : null,
        // where the stream is not a terminal (a pipe, a file), its bytes pass through unchanged
        // with --json stdout holds the record alone: the job's output (both streams) goes to stderr
        onBytes: (stream, bytes) => {
          const to = options.json === true ? 2 : stream;
          if (!rawBytes(to)) return;
          out.bytes?.(to, bytes);
          written(to, bytes.subarray(-1).toString("latin1"));
          if (to === 2) footer?.passed(bytes.subarray(-1).toString("latin1"));
        },
        onChunk: (stream, chunk) => {
          if (options.json === true) {
            if (!rawBytes(2)) {
              out.stderr(chunk);
              written(2, chunk);
            }
            return;
          }
          if (rawBytes(stream)) return;
          const write = (text: string): void => {
            if (stream === 1) out.stdout(text);
            else out.stderr(text);
            written(stream, text);
          };
          if (footer) footer.chunk(chunk, write, stream === 2 || out.stdoutIsTTY === true);
          else write(chunk);
        },
        onState: (state, now) => {
          latestState = state;
          footer?.update(state, now);
        },
      },
      { devices, store },
    );
    footer?.close(latestState ?? undefined);
    ended = true;
    return { result, exitCode: exitCodeOf(result.job.end, result.job.interruptedBy), storeRoot: root, note: inventory.note, lineOpen: open[2] };
  } finally {
    running = false;
    // the last scrape lands after the run: keep /metrics (with brim_job_running 0) up a little longer
    if (metrics !== null) {
      const grace = options.prometheusGrace ?? 5;
      if (ended && grace > 0) setTimeout(() => metrics.close(), grace * 1000);
      else metrics.close();
    }
  }
}

/**
 * Adds `brim run` to the program. `setExitCode` receives the job's exit status.
 *
 * @example
 * ```ts
 * registerRun(program, processOutput, (code) => (exitCode = code));
 * ```
 */
export function registerRun(program: Command, out: Output, setExitCode: (code: number) => void): void {
  labelOptions(program.command("run"))
    .summary("run a training job under brim's guard: live view, memory cap, OOM recovery, a recorded timeline")
    .description(
      "Runs <command> in its own process group with brim's SDK channel, shows a live view (step, samples/s, memory against the cap, " +
        "utilization, data wait), keeps the job's processes under --cap, records a timeline in the run store and prints a summary. " +
        "The exit code is the job's.",
    )
    .argument("<command...>", "the training command, after --")
    .passThroughOptions()
    .option("--cap <size>", "memory cap for the whole process tree: GPU memory, or RAM in CPU mode (e.g. 12GiB)", (text) => parseByteSize(text))
    .option("--store <dir>", "run store folder (default .brim, or $BRIM_STORE)")
    .option("--prometheus <[host:]port>", "serve Prometheus metrics on [host:]port/metrics (host 127.0.0.1 unless given)", parseListen)
    .option(
      "--prometheus-token <token>",
      "bearer token scrapes must send, 16 characters or more; required with a host other than loopback (or BRIM_PROMETHEUS_TOKEN)",
    )
    .addOption(
      new Option("--prometheus-grace <seconds>", "keep the metrics endpoint up this long after the run, for the last scrape (0 = no)")
        .default(5)
        .argParser(positiveInteger("--prometheus-grace", 0)),
    )
    .addOption(new Option("--hz <n>", "sampling rate of GPU and process readings").default(10).argParser(positiveNumber("--hz")))
    .addOption(
      new Option("--hung-after <seconds>", "stop and classify the job as hung after this long without a step (0 = never)")
        .default(900)
        .argParser(positiveInteger("--hung-after", 0)),
    )
    .addOption(
      new Option(
        "--hang-after <seconds>",
        "with 2+ ranks (torchrun, accelerate): after this long with no step on any rank, dump every rank's stacks and end the ranks; below NCCL's 10-minute watchdog (0 = --hung-after)",
      )
        .default(300)
        .argParser(positiveInteger("--hang-after", 0)),
    )
    .addOption(new Option("--grace <seconds>", "seconds between SIGTERM and SIGKILL when stopping the job").default(10).argParser(positiveNumber("--grace")))
    .option("--steps <n>", "step budget: the job ends after n optimizer steps (attach or SDK; progress lines as the last resort)", positiveInteger("--steps"))
    .addOption(new Option("--warmup <n>", "steps left out of steady-state throughput").default(3).argParser(positiveInteger("--warmup", 0)))
    .addOption(new Option("--knob <name=value>", "a knob value for the job (read with brim.knob); repeatable").argParser(parseKnobArgument))
    .option("--no-shrink", "never ask the SDK to shrink the micro-batch near the cap (stop at the cap instead)")
    .option("--no-attach", "do not attach to the Python job (optimizer steps, DataLoader, autocast are then seen only through the SDK); also BRIM_ATTACH=0")
    .option(
      "--progress-pattern <regex>",
      "read throughput from output lines matching this pattern (named groups samples_per_s, steps_per_s, s_per_step, ms_per_step, step) when brim sees no step otherwise",
    )
    .option("--json", "print the run record (metadata and summary) as JSON at the end, on stdout alone (the job's output goes to stderr)")
    .option("--quiet", "no live view; the summary only")
    .option(
      "--keep-on-supervisor-loss",
      "if brim itself is lost (killed, crashed, terminal closed), let the job run on, recorded as unguarded, instead of stopping it",
    )
    .option("--leave-daemons", "let processes the job started outside its process group (daemons) run on after it; they are named in the record")
    .addHelpText(
      "after",
      `
Examples:
  brim run -- python train.py --config conf.yaml
  brim run --cap 12GiB -- python train.py              keep the job under 12 GiB of GPU memory
  brim run --cap 6GiB --prometheus 9400 -- python train.py
  brim run --steps 200 --knob batch_size=64 -- python examples/nbeats/train.py --config examples/nbeats/config.yaml

How the cap holds: the SDK caps PyTorch's allocator and recovers from out-of-memory inside the step
(split the micro-batch, same effective batch); brim watches the whole process tree and asks the SDK
to shrink near the cap; as the last resort it stops the job and says so. Without a GPU the cap is on
the RAM of the process tree counted as PSS (a page shared by forked loader workers counts once), RSS
where PSS cannot be read; the summary shows both.

If brim is lost (killed, crashed, its terminal closed), a watchdog stops the job and finishes the
record with the cause supervisor_lost; --keep-on-supervisor-loss lets the job run on, recorded as
unguarded. Processes the job started that left its process group (a double-forked daemon) are
found by the BRIM_RUN_ID they inherit, counted in the tree and the cap, and stopped with the job
(--leave-daemons lets them run on); the record names them. See docs/reliability.md.

End causes: ok, gpu_oom, host_oom, gpu_fault, hung, crashed, interrupted, cap_exceeded, store_failed
(exit 74), supervisor_lost (exit 70).
The record lands in .brim/runs/<id>/ (run.json, timeline.ndjson, output.log): see docs/run-store.md.`,
    )
    .action(async (command: string[], options: RunCommandOptions) => {
      // The last net: an error nothing caught while guarding is one line and exit 70; brim's
      // watchdog then stops the job and finishes its record (supervisor_lost), as for any loss of brim.
      const lastNet = (error: Error): void => {
        out.stderr(
          `brim: internal error while guarding the job: ${(error.message.split("\n", 1)[0] ?? "").trim()}; the job is being stopped (supervisor_lost)\n`,
        );
        process.exit(EXIT_GUARD_FAILED);
      };
      process.once("uncaughtException", lastNet);
      let run: RunCommandResult;
      try {
        run = await runCommand(command, options, out);
      } finally {
        process.off("uncaughtException", lastNet);
      }
      // ranks: each rank's own figures beside the summary's global ones (torchrun, DDP)
      const ranks = run.result.timeline.measured.ranks;
      if (options.json) out.stdout(`${JSON.stringify(ranks.length > 0 ? { ...run.result.meta, ranks } : run.result.meta, null, 2)}\n`);
      else out.stderr(`${run.lineOpen ? "\n" : ""}${renderRunSummary(run)}`);
      setExitCode(run.exitCode);
    });
}
