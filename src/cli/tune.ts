import { Option, type Command } from "commander";
import { parseByteSize } from "../bytes.ts";
import { tuneState } from "../configs/index.ts";
import { openDevices, type Devices } from "../devices/index.ts";
import { ERROR_CODES, UsageError } from "../errors/index.ts";
import { renderLiveView } from "../metrics/index.ts";
import { RunStore, storeRoot } from "../record/store.ts";
import { applyTune, type ApplyTuneResult } from "../tune/apply.ts";
import { parseBinding, type KnobBinding } from "../knobs/index.ts";
import type { KnobValue } from "../knobs/index.ts";
import { tune, TUNE_STRATEGIES, type TuneResult, type TuneStrategy } from "../tune/tune.ts";
import { labelOptions, recordLabels } from "./labels.ts";
import type { Output } from "./output.ts";
import { knobDelta, progressBar, renderApply, renderTrialLine, renderTuneTable } from "./render-tune.ts";
import { jobSwitches, knobList } from "./run.ts";

/** Options of `brim tune` as the command line gives them. */
export interface TuneCommandOptions {
  cap?: number;
  effectiveBatch?: number;
  freeBatch?: boolean;
  bind: string[];
  knob?: Record<string, KnobValue[]>;
  fix: string[];
  maxTrials: number;
  maxTime: number;
  warmup: number;
  steps: number;
  /** absent: the default window, which waits for the steps the job's noise asks (K) */
  window?: number;
  trialTime: number;
  maxBatch?: number;
  strategy: TuneStrategy;
  apply?: boolean;
  force?: boolean;
  store?: string;
  json?: boolean;
  quiet?: boolean;
  /** --name / --tag: kept in tune.json and in the run.json of each trial */
  name?: string;
  tag?: Record<string, string>;
}

/**
 * Parses a duration: `90` or `90s`, `15m`, `1h`.
 *
 * @example
 * ```ts
 * parseDuration("15m"); // 900
 * ```
 */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(s|m|h)?$/.exec(text.trim());
  if (!match) throw new UsageError(`expected a duration like 90s, 15m or 1h, got '${text}'`);
  const value = Number(match[1]);
  const unit = match[2] ?? "s";
  const seconds = value * (unit === "h" ? 3600 : unit === "m" ? 60 : 1);
  if (seconds <= 0) throw new UsageError(`a duration must be positive, got '${text}'`);
  return seconds;
}

function integerAtLeast(name: string, min: number): (text: string) => number {
  return (text) => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < min) throw new UsageError(`${name} must be an integer ≥ ${min}, got '${text}'`);
    return value;
  };
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** What `brim tune` returns. */
export interface TuneCommandResult {
  tune: TuneResult;
  applied: ApplyTuneResult | null;
}

/**
 * `brim tune`: tunes the command's knobs on short real trials and, with `--apply`, writes the winner.
 *
 * @example
 * ```ts
 * const { tune } = await tuneCommand(["python", "train.py", "--config", "config.yaml"], options, processOutput);
 * ```
 */
export async function tuneCommand(command: string[], options: TuneCommandOptions, out: Output, devices: Devices = openDevices()): Promise<TuneCommandResult> {
  const cwd = process.cwd();
  const store = new RunStore(storeRoot(options.store, process.env, cwd), undefined, recordLabels(options));
  const bindings: KnobBinding[] = options.bind.map((text) => parseBinding(text, cwd));
  const inventory = devices.inventory();
  const talk = !options.json;
  if (inventory.note !== null && talk) out.stderr(`brim: ${inventory.note}\n`);
  const tty = out.stderrIsTTY === true && talk && !options.quiet;
  let drawn = 0;
  let header = "";
  let baseline: Record<string, KnobValue> | null = null;
  const erase = (): void => {
    if (drawn > 0) out.stderr(`\u001b[${drawn}F\u001b[J`);
    drawn = 0;
  };
  // Ctrl-C between trials must not kill brim with a trial's config copy or a half-told tune behind:
  // it stops the tune; during a trial the guard also passes it to the job.
  const abort = new AbortController();
  // A lost terminal (SIGHUP) stops the tune the same way; its writes then fail with EIO or EPIPE.
  const onSignal = (): void => abort.abort();
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  process.on("SIGHUP", onSignal);
  for (const stream of [process.stdout, process.stderr]) if (stream.listenerCount("error") === 0) stream.on("error", () => {});
  const result = await tune(
    {
      command,
      cwd,
      capBytes: options.cap,
      effectiveBatch: options.effectiveBatch,
      freeBatch: options.freeBatch,
      bindings,
      knobValues: options.knob ?? {},
      fixed: options.fix,
      maxTrials: options.maxTrials,
      maxTimeS: options.maxTime,
      warmupSteps: options.warmup,
      measureSteps: options.steps,
      windowS: options.window,
      trialTimeLimitS: options.trialTime,
      maxMicroBatch: options.maxBatch,
      strategy: options.strategy,
      forwardSignals: true,
      abortSignal: abort.signal,
      onNote: (line) => {
        if (talk) out.stderr(`brim: ${line}\n`);
      },
      onTrialStart: (event) => {
        if (!talk) return;
        baseline ??= event.knobs;
        header = `trial ${event.index}/${event.plannedTotal} ${tty ? `${progressBar(event.index, event.plannedTotal, 16)} ` : ""}${knobDelta(event.knobs, event.index === 0 ? {} : baseline)} — ${event.purpose}`;
        if (!tty) out.stderr(`brim: ${header}\n`);
      },
      onState: (state) => {
        if (!tty) return;
        erase();
        const width = Math.max(40, out.columns ?? 100);
        // a wrapped line would break the redraw (it moves the cursor up by lines, not rows)
        const top = header.length > width ? `${header.slice(0, width - 1)}…` : header;
        const lines = [top, ...renderLiveView(state, { color: out.color === true, width })];
        out.stderr(`${lines.join("\n")}\n`);
        drawn = lines.length;
      },
      onTrialEnd: (event) => {
        if (!talk) return;
        erase();
        out.stderr(
          `brim: ${renderTrialLine(event.index, event.plannedTotal, knobDelta(event.knobs, event.index === 0 ? {} : (baseline ?? {})), event.result)}\n`,
        );
      },
    },
    { devices, store },
  ).finally(() => {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    process.off("SIGHUP", onSignal);
  });
  erase();
  const applied =
    options.apply && result.record.winner !== null && result.record.stop_reason !== "interrupted"
      ? await applyTune(result.record, { force: options.force === true, dryRun: false })
      : null;
  return { tune: result, applied };
}

/**
 * Adds `brim tune` and `brim apply` to the program.
 *
 * @example
 * ```ts
 * registerTune(program, processOutput);
 * ```
 */
export function registerTune(program: Command, out: Output, setExitCode: (code: number) => void = () => {}): void {
  labelOptions(program.command("tune"))
    .summary("find the fastest micro-batch, accumulation, precision and loader settings that fit, on short real trials")
    .description(
      "Runs <command> on short trials (a few warm-up steps, then measured steps) with different knob values and picks the " +
        "configuration with the highest measured samples/s whose process tree stays under the cap. Trial 0 is your configuration " +
        "as it is. Knobs reach the job through a {name} template in the command, a key in a config file named in the command " +
        "(found by name: batch_size, num_workers, pin_memory, precision, accumulate_grad_batches ...), or brim.knob() in the job.",
    )
    .argument("<command...>", "the training command, after --")
    .passThroughOptions()
    .option("--cap <size>", "memory cap of the job's process tree: GPU memory, or RAM in CPU mode (default 90% of the GPU / half the RAM)", (text) =>
      parseByteSize(text),
    )
    .option("--effective-batch <n>", "hold micro-batch × accumulation at n (the maths stay the same)", integerAtLeast("--effective-batch", 1))
    .option("--free-batch", "let the effective batch change with the micro-batch even when your accumulation is > 1")
    .option(
      "--bind <knob=file:key|knob=env>",
      "where a knob lives, when brim cannot find it: conf/train.yaml:loader.bs, or env (brim.knob only); repeatable",
      collect,
      [],
    )
    .addOption(new Option("--knob <name=v1,v2,...>", "values to try for a knob (one value: the baseline of a {name} template); repeatable").argParser(knobList))
    .option("--fix <knob>", "do not tune this knob; repeatable", collect, [])
    .addOption(new Option("--max-trials <n>", "stop after n trials").default(16).argParser(integerAtLeast("--max-trials", 1)))
    .addOption(new Option("--max-time <duration>", "stop starting trials after this long (90s, 15m, 1h)").default(20 * 60, "20m").argParser(parseDuration))
    .addOption(
      new Option("--warmup <steps>", "steps per trial always left out of the measurement (slower leading steps are found and left out too)")
        .default(1)
        .argParser(integerAtLeast("--warmup", 0)),
    )
    .addOption(
      new Option("--steps <n>", "measured steps per trial at most (a trial stops sooner once its throughput is stable)")
        .default(20)
        .argParser(integerAtLeast("--steps", 2)),
    )
    .addOption(
      new Option("--window <duration>", "measured seconds per trial at most (default 10s, after the steady steps this job's noise asks)").argParser(
        parseDuration,
      ),
    )
    .addOption(new Option("--trial-time <duration>", "longest a single trial may run, start-up included").default(300, "5m").argParser(parseDuration))
    .option("--max-batch <n>", "largest micro-batch to try (e.g. the dataset size)", integerAtLeast("--max-batch", 1))
    .addOption(new Option("--strategy <name>", "the search (the other two are there to compare with)").choices(TUNE_STRATEGIES).default("brim"))
    .option("--apply", "write the winner into the config file(s) at the end (with a backup)")
    .option("--force", "with --apply: write even if a config file changed since the tune read it")
    .option("--store <dir>", "run store folder (default .brim, or $BRIM_STORE)")
    .option("--no-attach", "do not attach to the Python job (see brim run --help); also BRIM_ATTACH=0")
    .option("--progress-pattern <regex>", "read throughput from output lines matching this pattern when brim sees no step otherwise (see brim run --help)")
    .option("--json", "print the tune record as JSON")
    .option("--quiet", "no live view; one line per trial")
    .addHelpText(
      "after",
      `
Examples:
  brim tune -- python examples/nbeats/train.py --config examples/nbeats/config.yaml
  brim tune --cap 12GiB --effective-batch 256 --apply -- python train.py --config conf/config.yaml
  brim tune --knob batch_size=32 -- python train.py --batch-size {batch_size}
  brim tune --bind batch_size=conf/data.toml:loader.batch_size -- python train.py
  brim tune --knob num_workers=0,2,4,8 --fix precision -- python train.py --config config.yaml

Trials: each leaves out its warm-up, then measures until its throughput is stable (±2 %), --steps
steps or --window seconds, and stops early when clearly slower than the best so far. Search: a memory
line (peak = a + b × micro-batch) predicts the largest micro-batch under the cap; throughput is
measured at a few micro-batches up to it (the fastest wins, not the largest); then precision and
loader settings, in the order the trials' evidence (data wait, GPU use) says pays most. Only
out-of-memory and cap failures move the memory line; a crash or a slow trial does not. A winner
must beat your configuration by more than the measured noise. Exit status 3 when there is no
winner (the reason and what to try next are printed).
Results land in .brim/tunes/<id>/tune.json; write the winner later with: brim apply <id>`,
    )
    .action(async (command: string[], options: TuneCommandOptions & { attach?: boolean; progressPattern?: string }) => {
      // trials inherit brim's environment: the switches travel there (the runner reads them)
      Object.assign(process.env, jobSwitches(options));
      const { tune: result, applied } = await tuneCommand(command, options, out);
      if (result.record.stop_reason === "interrupted") setExitCode(130);
      // no gain beyond noise, or yours measured faster, is an answer, not a failure: exit 0, with nothing to apply
      else if (result.record.winner === null && result.record.confirmation == null) setExitCode(ERROR_CODES.E_NO_TRIAL_FIT);
      if (options.json) {
        out.stdout(`${JSON.stringify(result.record, null, 2)}\n`);
        return;
      }
      out.stdout(renderTuneTable(result.record, out.columns ?? 100));
      if (applied) out.stdout(renderApply(applied, false));
      else if (result.record.winner) out.stdout(`apply with: brim apply ${result.record.id}${options.store ? ` --store ${options.store}` : ""}\n`);
    });

  program
    .command("apply")
    .summary("write a tune's winning knob values into the config file(s), keeping comments, with a backup")
    .argument("[tune]", "tune id, a unique part of it, or 'latest'", "latest")
    .option("--force", "write even if a file changed since the tune read it")
    .option("--dry-run", "print the diff, write nothing")
    .option("--store <dir>", "run store folder (default .brim, or $BRIM_STORE)")
    .option("--json", "print what was done as JSON")
    .addHelpText(
      "after",
      `
Examples:
  brim apply                 the latest tune
  brim apply 20261122-101000-aa01 --dry-run

YAML, JSON and TOML files are edited in place of the values only: comments, order and quoting stay.
The original is kept next to the file (<name>.brim-backup); the write is atomic (temp file + rename).
A file that changed since the tune read it is refused unless --force. Applying twice changes nothing.`,
    )
    .action(async (ref: string, options: { force?: boolean; dryRun?: boolean; store?: string; json?: boolean }) => {
      const store = new RunStore(storeRoot(options.store, process.env, process.cwd()));
      const id = await store.resolveTune(ref);
      const result = await applyTune(await store.readTune(id), {
        force: options.force === true,
        dryRun: options.dryRun === true,
        state: await tuneState(store, id),
      });
      out.stdout(options.json ? `${JSON.stringify(result, null, 2)}\n` : renderApply(result, options.dryRun === true));
    });
}
