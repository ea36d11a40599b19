// Shared plumbing of the GPU campaign: options, the machine, subprocesses with deadlines, result
// files (JSON lines, one record per measurement, resumable by key) and reading brim's run store.
import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const SCHEMA = "brim.gpu-campaign/v1";
export const PARTS = ["plan-accuracy", "guard", "tune", "utilization", "overhead"];
/** Parts run only when named, not by `all`. */
export const EXTRA_PARTS = ["snapshots"];
export const GiB = 2 ** 30;

const USAGE = `usage: bash bench/gpu/run.sh <part> [options]
parts: ${PARTS.join(", ")}, all; ${EXTRA_PARTS.join(", ")} (only when named: CUDA memory snapshots of the plan's jobs, issue 26)
options:
  --out <dir>          results folder (default $OUT, else bench/results/local); files go to <dir>/<gpu-slug>/
  --prior <dir>        earlier results to resume from (default bench/results/gpu); read, never written
  --budget <duration>  stop starting measurements after this long (default 540s; e.g. 300s, 9m)
  --quick              CPU smoke mode: one tiny job, 2 micro-batches, fp32, a few steps and trials
  --jobs <a,b>         only these jobs (names in bench/gpu/lib/jobs.mjs)
  --python <path>      the Python that runs the jobs (default $PYTHON, else python3)
  --parallel <n>       plan-accuracy runs at once (default 2, --quick 1; NVML per-process peaks are
                       unaffected, the device-level readings kept beside them need 1)
  --retry-failed       measure again what an earlier call recorded as failed
  --work <dir>         scratch folder for run stores and profiles (default a temp folder)`;

/** Parses `<part> [options]`; exits 2 with the usage on bad input. */
export function parseArgs(argv) {
  const fail = (why) => {
    process.stderr.write(`campaign: ${why}\n${USAGE}\n`);
    process.exit(2);
  };
  const [part, ...rest] = argv;
  if (part === undefined || part === "--help" || part === "-h") {
    process.stdout.write(USAGE + "\n");
    process.exit(part === undefined ? 2 : 0);
  }
  if (part !== "all" && !PARTS.includes(part) && !EXTRA_PARTS.includes(part)) fail(`unknown part '${part}'`);
  const opts = {
    part,
    out: process.env.OUT ? process.env.OUT : join(REPO, "bench", "results", "local"),
    prior: join(REPO, "bench", "results", "gpu"),
    budgetS: 540,
    quick: false,
    jobs: null,
    python: process.env.PYTHON || "python3",
    parallel: null,
    retryFailed: false,
    work: null,
  };
  for (let i = 0; i < rest.length; i++) {
    const flag = rest[i];
    const value = () => {
      const v = rest[++i];
      if (v === undefined) fail(`${flag} needs a value`);
      return v;
    };
    if (flag === "--out") opts.out = resolve(value());
    else if (flag === "--prior") opts.prior = resolve(value());
    else if (flag === "--budget") opts.budgetS = parseDuration(value()) ?? fail(`--budget: expected a duration like 540s or 9m`);
    else if (flag === "--quick") opts.quick = true;
    else if (flag === "--jobs") opts.jobs = value().split(",").filter(Boolean);
    else if (flag === "--python") opts.python = value();
    else if (flag === "--parallel") opts.parallel = Math.max(1, Number.parseInt(value(), 10) || 1);
    else if (flag === "--retry-failed") opts.retryFailed = true;
    else if (flag === "--work") opts.work = resolve(value());
    else fail(`unknown option '${flag}'`);
  }
  return opts;
}

/** "90s", "15m", "1h", "120" (seconds) → seconds; null when unreadable. */
export function parseDuration(text) {
  const m = /^(\d+(?:\.\d+)?)(s|m|h)?$/.exec(String(text).trim());
  if (!m) return null;
  return Number(m[1]) * { s: 1, m: 60, h: 3600 }[m[2] ?? "s"];
}

/** "NVIDIA H100 80GB HBM3" → "nvidia-h100-80gb-hbm3"; no GPU → "cpu". */
export function gpuSlug(detect) {
  const name = detect?.gpus?.[0]?.name;
  if (!name) return "cpu";
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-|-$/g, "");
}

/** brim plan's GPU option for the card found: a catalog id when the name says which, else its memory. */
export function planGpuArgs(detect) {
  const gpu = detect?.gpus?.[0];
  if (!gpu) return ["--gpu-memory", "80"];
  const name = gpu.name.toLowerCase();
  const known = [
    [/h200/, "h200"],
    [/h100.*pcie/, "h100-pcie"],
    [/h100/, "h100-sxm"],
    [/a100.*80/, "a100-80gb"],
    [/a100/, "a100-40gb"],
    [/l40s/, "l40s"],
    [/\bl4\b/, "l4"],
    [/\bt4\b/, "t4"],
    [/a10\b/, "a10"],
    [/rtx 4090/, "rtx-4090"],
    [/rtx 3090/, "rtx-3090"],
  ];
  const hit = known.find(([re]) => re.test(name));
  return hit ? ["--gpu", hit[1]] : ["--gpu-memory", `${(gpu.total_bytes / GiB).toFixed(2)}GiB`];
}

/**
 * Runs argv in its own process group; kills the group at `timeoutS`. Never throws for the child's
 * failure: the result says what happened.
 */
export function runProcess(argv, { cwd = REPO, env = process.env, timeoutS = 600, input = null } = {}) {
  return new Promise((done) => {
    const started = Date.now();
    const child = spawn(argv[0], argv.slice(1), { cwd, env, detached: true, stdio: [input === null ? "ignore" : "pipe", "pipe", "pipe"] });
    const out = [];
    const err = [];
    let timedOut = false;
    child.stdout.on("data", (d) => out.push(d));
    child.stderr.on("data", (d) => err.push(d));
    if (input !== null) child.stdin.end(input);
    const kill = (signal) => {
      try {
        process.kill(-child.pid, signal);
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(
      () => {
        timedOut = true;
        kill("SIGTERM");
        // brim stops its job within its 10 s grace on SIGTERM; then nothing is left to wait for
        setTimeout(() => kill("SIGKILL"), 15_000).unref();
      },
      Math.max(1, timeoutS) * 1000,
    );
    child.on("error", (error) => {
      clearTimeout(timer);
      done({ code: null, signal: null, stdout: "", stderr: String(error.message), wallS: (Date.now() - started) / 1000, timedOut });
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      done({
        code,
        signal,
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: Buffer.concat(err).toString("utf8"),
        wallS: (Date.now() - started) / 1000,
        timedOut,
      });
    });
  });
}

/** The first top-level JSON object in a command's stdout (brim prints one with --json). */
export function parseJsonOutput(text) {
  const start = text.indexOf("{");
  if (start < 0) return null;
  try {
    return JSON.parse(text.slice(start));
  } catch {
    const line = text.split("\n").find((l) => l.startsWith("{"));
    try {
      return line ? JSON.parse(line) : null;
    } catch {
      return null;
    }
  }
}

/** An argv as one shell line, for people to read and paste. */
export function shellLine(argv) {
  return argv.map((a) => (/^[A-Za-z0-9_./=:,@%+-]+$/.test(a) ? a : `'${String(a).replace(/'/g, "'\\''")}'`)).join(" ");
}

/**
 * The brim commit measured (BENCHMARKS.md dates each part by it): the bundle's, from the MANIFEST.json
 * beside `.device/brim/`, else this checkout's HEAD; null when neither says.
 */
export function brimCommit(entry) {
  const manifest = join(dirname(dirname(dirname(entry))), "MANIFEST.json");
  if (existsSync(manifest)) {
    try {
      return JSON.parse(readFileSync(manifest, "utf8")).commit ?? null;
    } catch {
      return null;
    }
  }
  const head = spawnSync("git", ["rev-parse", "HEAD"], { cwd: REPO, encoding: "utf8" });
  return head.status === 0 ? head.stdout.trim() : null;
}

/** The campaign's state for one call: machine, versions, budget, output files, logging. */
export class Campaign {
  constructor(opts) {
    this.opts = opts;
    this.startedMs = Date.now();
    this.deadlineMs = this.startedMs + opts.budgetS * 1000;
    this.node = process.execPath;
    this.brimEntry = resolve(
      process.env.BRIM_BIN ??
        (existsSync(join(REPO, ".device", "brim", "bin", "brim.js")) ? join(REPO, ".device", "brim", "bin", "brim.js") : join(REPO, "bin", "brim.js")),
    );
    this.work = opts.work ?? join(tmpdir(), `brim-campaign-${process.pid}`);
    mkdirSync(this.work, { recursive: true });
    this.durations = new Map();
    this.stoppedByBudget = false;
  }

  /** Detects the machine and versions; makes the output folder. */
  async init() {
    const detect = await this.brim(["detect", "--json"], { timeoutS: 60 });
    this.machine = parseJsonOutput(detect.stdout) ?? { backend: "unknown", error: detect.stderr.trim().split("\n").pop() };
    this.slug = gpuSlug(this.machine);
    this.gpu = this.machine.gpus?.[0] ?? null;
    const version = await this.brim(["--version"], { timeoutS: 30 });
    const py = await runProcess([this.opts.python, "-c", PY_VERSIONS], { timeoutS: 120 });
    let pyv = {};
    try {
      pyv = JSON.parse(py.stdout.trim().split("\n").pop() ?? "{}");
    } catch {
      pyv = { error: (py.stderr || py.stdout).trim().split("\n").pop() ?? "python did not run" };
    }
    this.versions = { brim: version.stdout.trim(), brim_commit: brimCommit(this.brimEntry), node: process.version, ...pyv };
    this.outDir = join(this.opts.out, this.slug);
    this.priorDir = join(this.opts.prior, this.slug);
    mkdirSync(this.outDir, { recursive: true });
    writeFileSync(
      join(this.outDir, "machine.json"),
      JSON.stringify(
        {
          schema: SCHEMA,
          detected_at: new Date().toISOString(),
          machine: this.machine,
          versions: this.versions,
          brim_entry: this.rel(this.brimEntry),
          python: this.opts.python,
        },
        null,
        2,
      ) + "\n",
    );
    this.logFile = join(this.outDir, "campaign.log");
    // the log, like the results, goes on from the earlier calls' one
    const priorLog = join(this.priorDir, "campaign.log");
    if (!existsSync(this.logFile) && existsSync(priorLog) && resolve(priorLog) !== resolve(this.logFile)) copyFileSync(priorLog, this.logFile);
    this.log(
      `campaign ${this.opts.part}${this.opts.quick ? " --quick" : ""}: ${this.slug}, budget ${this.opts.budgetS}s, brim ${this.versions.brim} (${this.rel(this.brimEntry)}), torch ${this.versions.torch ?? "?"}, out ${this.outDir}`,
    );
  }

  log(line) {
    const text = `[${new Date().toISOString()}] ${line}`;
    process.stdout.write(text + "\n");
    if (this.logFile) appendFileSync(this.logFile, text + "\n");
  }

  /** Path relative to the repository root when inside it (commands are recorded that way). */
  rel(path) {
    const r = relative(REPO, path);
    return r.startsWith("..") ? path : r;
  }

  remainingS() {
    return (this.deadlineMs - Date.now()) / 1000;
  }

  /** Records how long a kind of measurement took, to predict the next one. */
  took(kind, seconds) {
    const seen = this.durations.get(kind) ?? [];
    seen.push(seconds);
    this.durations.set(kind, seen);
  }

  /** True when a measurement of `kind` (default `guessS`) still fits in the budget; logs when not. */
  fits(kind, guessS) {
    const seen = this.durations.get(kind);
    // the longest of the last few: one slow outlier (a first run that generates data) fades out
    const expect = seen && seen.length > 0 ? Math.max(...seen.slice(-3)) * 1.1 : guessS;
    if (expect <= this.remainingS()) return true;
    if (!this.stoppedByBudget)
      this.log(`budget: ${this.remainingS().toFixed(0)}s left, a ${kind} takes about ${expect.toFixed(0)}s; stopping here (run again to resume)`);
    this.stoppedByBudget = true;
    return false;
  }

  /** Timeout for one subprocess: its own limit, never past the budget. */
  timeoutFor(limitS) {
    return Math.max(5, Math.min(limitS, this.remainingS()));
  }

  brimArgv(args) {
    return [this.node, this.brimEntry, ...args];
  }

  /** Runs brim with `args` from the repository root. */
  brim(args, opts = {}) {
    return runProcess(this.brimArgv(args), opts);
  }

  /** The argv as recorded: `brim` for brim's entry, paths relative to the repository root. */
  recorded(argv) {
    return argv.map((a, i) => (i === 0 && a === this.node ? "node" : a === this.brimEntry ? this.rel(this.brimEntry) : a));
  }

  /** A record's common envelope. */
  envelope(part, key, argv, startedAt, extra = {}) {
    const command = this.recorded(argv);
    return {
      schema: SCHEMA,
      part,
      key,
      quick: this.opts.quick,
      command,
      command_line: shellLine(command),
      cwd: ".",
      started_at: startedAt,
      ended_at: new Date().toISOString(),
      machine: this.machine,
      versions: this.versions,
      ...extra,
    };
  }

  results(part) {
    return new Results(this, part);
  }
}

const PY_VERSIONS = `import json, platform
v = {"python": platform.python_version()}
try:
    import torch
    v["torch"] = torch.__version__
    v["cuda"] = torch.version.cuda
    v["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    v["cuda_available"] = torch.cuda.is_available()
    v["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
except Exception as e:
    v["torch_error"] = str(e).splitlines()[0]
print(json.dumps(v))`;

/** Reads a JSON-lines file; lines that do not parse (a cut-off last line) are skipped. */
export function readJsonLines(file) {
  if (!existsSync(file)) return [];
  const out = [];
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.trim() === "") continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      // a partial line from an interrupted call
    }
  }
  return out;
}

/**
 * The records of one part: those already in the output file, plus those from the prior folder
 * (copied over on the first write, so each call's output file holds every record so far).
 */
export class Results {
  constructor(campaign, part) {
    this.campaign = campaign;
    this.part = part;
    this.file = join(campaign.outDir, `${part}.jsonl`);
    const priorFile = join(campaign.priorDir, `${part}.jsonl`);
    this.records = readJsonLines(this.file);
    this.pending = [];
    if (resolve(priorFile) !== resolve(this.file)) {
      const have = new Set(this.records.map((r) => r.key + "\u0000" + r.started_at));
      this.pending = readJsonLines(priorFile).filter((r) => !have.has(r.key + "\u0000" + r.started_at));
      this.records.push(...this.pending);
    }
    if (this.pending.length > 0) this.flushPending();
  }

  flushPending() {
    mkdirSync(dirname(this.file), { recursive: true });
    appendFileSync(this.file, this.pending.map((r) => JSON.stringify(r) + "\n").join(""));
    this.pending = [];
  }

  /** The latest record for `key` (failed ones count unless --retry-failed). */
  get(key) {
    const matches = this.records.filter((r) => r.key === key && r.schema === SCHEMA && (r.ok || !this.campaign.opts.retryFailed));
    return matches.at(-1) ?? null;
  }

  has(key) {
    return this.get(key) !== null;
  }

  add(record) {
    this.records.push(record);
    appendFileSync(this.file, JSON.stringify(record) + "\n");
    const status = record.ok ? "ok" : `FAILED: ${record.error ?? "?"}`;
    this.campaign.log(`${this.part} ${record.key}: ${status}`);
  }
}

/** What a brim run left in its store: run.json, events and a digest of the samples, the job's output. */
export function readRunStore(store, runId) {
  const dir = join(store, "runs", runId);
  const read = (name) => (existsSync(join(dir, name)) ? readFileSync(join(dir, name), "utf8") : "");
  let run = null;
  try {
    run = JSON.parse(read("run.json"));
  } catch {
    run = null;
  }
  const events = [];
  let samples = 0;
  let deviceMax = null;
  let deviceMin = null;
  let treeMax = null;
  let steps = 0;
  const stepPids = new Set();
  for (const line of read("timeline.ndjson").split("\n")) {
    if (!line.startsWith("{")) continue;
    let entry;
    try {
      entry = JSON.parse(line);
    } catch {
      continue;
    }
    if (entry.kind === "event")
      events.push({ t: entry.t, event: entry.event, step: entry.step ?? null, message: entry.message ?? null, details: entry.details ?? {} });
    else if (entry.kind === "step") {
      steps++;
      stepPids.add(entry.pid);
    } else if (entry.kind === "sample") {
      samples++;
      const used = entry.gpus?.[0]?.used_bytes;
      if (typeof used === "number") {
        deviceMax = deviceMax === null ? used : Math.max(deviceMax, used);
        deviceMin = deviceMin === null ? used : Math.min(deviceMin, used);
      }
      const tree = entry.tree?.gpu_bytes;
      if (typeof tree === "number") treeMax = treeMax === null ? tree : Math.max(treeMax, tree);
    }
  }
  const output = read("output.log")
    .split("\n")
    .map((l) => l.replace(/^[12] /, ""));
  return {
    run,
    events: events.filter((e) => e.event !== "knob_read"),
    knobs_read: events.filter((e) => e.event === "knob_read").map((e) => e.details),
    timeline: {
      samples_stored: samples,
      steps,
      step_pids: stepPids.size,
      device_used_max_bytes: deviceMax,
      device_used_min_bytes: deviceMin,
      tree_gpu_max_bytes_stored: treeMax,
    },
    done: parseDoneLine(output),
    output_tail: output.filter((l) => l.trim() !== "").slice(-8),
  };
}

/** The examples' last line, `[name] done steps=.. samples=.. samples_per_s=.. ...`, as an object. */
export function parseDoneLine(lines) {
  const line = [...lines].reverse().find((l) => /^\[[^\]]+\] done /.test(l));
  if (!line) return null;
  const fields = { job: /^\[([^\]]+)\]/.exec(line)[1] };
  for (const [, k, v] of line.matchAll(/(\w+)=(\S+)/g)) fields[k] = Number.isFinite(Number(v)) && v !== "" ? Number(v) : v;
  return fields;
}

/** Median of numbers (null for none). */
export function median(values) {
  const xs = values.filter((v) => typeof v === "number" && Number.isFinite(v)).sort((a, b) => a - b);
  if (xs.length === 0) return null;
  const mid = xs.length >> 1;
  return xs.length % 2 ? xs[mid] : (xs[mid - 1] + xs[mid]) / 2;
}
