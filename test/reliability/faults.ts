// Fault injection shared by the reliability suite (test/reliability/) and the soak (bench/faults.bench.mjs):
// each fault runs the built CLI as a real process and returns what a user would find afterwards.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { scaled } from "../helpers/time.ts";

export const REPO = resolve(import.meta.dirname, "..", "..");
export const BRIM = join(REPO, "bin", "brim.js");

/** What a fault left behind. */
export interface FaultOutcome {
  fault: string;
  /** processes of the job's group still running after the fault was handled (want 0) */
  orphans: number;
  /** the job ran on with nobody guarding it and no record saying so (want 0) */
  unguarded: number;
  /** timeline or output lines that do not parse / are cut, and temp files left (want 0) */
  torn: number;
  /** a Node stack trace on brim's stderr (want false) */
  stackTrace: boolean;
  exitCode: number | null;
  endCause: string | null;
  stderr: string;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Pids whose process group is `pgid` and that still run (zombies do not count). */
export function groupMembers(pgid: number): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X") pids.push(Number(name));
  }
  return pids;
}

export async function until(check: () => boolean, ms: number): Promise<boolean> {
  // the limit is scaled for the machine (test/helpers/time.ts): a busy one takes longer, it does not fail
  const deadline = Date.now() + scaled(ms);
  while (Date.now() < deadline) {
    if (check()) return true;
    await sleep(25);
  }
  return check();
}

/** The one run folder of a store, once there is one. */
export function runDirOf(store: string): string | null {
  try {
    const ids = readdirSync(join(store, "runs")).filter((n) => /^\d{8}-\d{6}-[0-9a-f]{4}$/.test(n));
    return ids.length === 0 ? null : join(store, "runs", ids.sort().at(-1) as string);
  } catch {
    return null;
  }
}

/** Torn lines in a run's files, and brim temp files anywhere in the store. */
export function tornIn(store: string): number {
  let torn = 0;
  const walk = (dir: string): void => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.includes(".brim-tmp-") || entry.name.includes(".tmp-")) torn++;
      else if (entry.name === "timeline.ndjson") {
        const text = readFileSync(path, "utf8");
        if (text !== "" && !text.endsWith("\n")) torn++;
        for (const line of text.split("\n")) {
          if (line === "") continue;
          try {
            JSON.parse(line);
          } catch {
            torn++;
          }
        }
      } else if (entry.name === "output.log") {
        const text = readFileSync(path, "utf8");
        if (text !== "" && !text.endsWith("\n")) torn++;
      } else if (entry.name === "run.json") {
        try {
          JSON.parse(readFileSync(path, "utf8"));
        } catch {
          torn++;
        }
      }
    }
  };
  walk(store);
  return torn;
}

export function runMeta(store: string): { end: { cause: string } | null; unguarded_since?: string } | null {
  const dir = runDirOf(store);
  if (dir === null) return null;
  try {
    return JSON.parse(readFileSync(join(dir, "run.json"), "utf8")) as { end: { cause: string } | null; unguarded_since?: string };
  } catch {
    return null;
  }
}

const STACK = /\n\s+at .+:\d+:\d+\)?\n|This is a bug/;

/** Starts `brim run` on a quiet job (a shell and a background sleep) and gives the job's pid once it runs. */
async function startQuietRun(
  store: string,
  cwd: string,
  extra: string[] = [],
): Promise<{ brim: ReturnType<typeof spawn>; jobPid: number; stderr: () => string; exited: Promise<number | null> }> {
  mkdirSync(cwd, { recursive: true });
  const child = spawn(process.execPath, [BRIM, "run", "--store", store, "--quiet", "--grace", "1", ...extra, "--", "sh", "-c", "sleep 300 & sleep 300; wait"], {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  child.stdout?.resume();
  const exited = new Promise<number | null>((r) => child.once("exit", (code, signal) => r(code ?? (signal ? 128 : null))));
  let jobPid = 0;
  await until(() => {
    const m = /pid (\d+)/.exec(stderr);
    if (m) jobPid = Number(m[1]);
    return jobPid > 0 && groupMembers(jobPid).length >= 2;
  }, 15_000);
  if (jobPid === 0) throw new Error(`brim did not start the job: ${stderr}`);
  return { brim: child, jobPid, stderr: () => stderr, exited };
}

/** SIGKILL of brim while its job prints nothing: the watchdog must stop the job and finish the record. */
export async function killBrimQuietJob(dir: string): Promise<FaultOutcome> {
  const store = join(dir, "store");
  const run = await startQuietRun(store, dir);
  run.brim.kill("SIGKILL");
  const exitCode = await run.exited;
  await until(() => groupMembers(run.jobPid).length === 0 && runMeta(store)?.end != null, 8_000);
  const orphans = groupMembers(run.jobPid).length;
  for (const pid of groupMembers(run.jobPid)) process.kill(pid, "SIGKILL");
  const meta = runMeta(store);
  return {
    fault: "sigkill-brim-quiet-job",
    orphans,
    unguarded: orphans > 0 && meta?.unguarded_since === undefined ? 1 : 0,
    torn: tornIn(store),
    stackTrace: STACK.test(run.stderr()),
    exitCode,
    endCause: meta?.end?.cause ?? null,
    stderr: run.stderr(),
  };
}

/** SIGKILL of brim with --keep-on-supervisor-loss: the job runs on, recorded as unguarded, then finished when it ends. */
export async function killBrimKeepJob(dir: string): Promise<FaultOutcome & { keptRunning: boolean; markedUnguarded: boolean }> {
  const store = join(dir, "store");
  const run = await startQuietRun(store, dir, ["--keep-on-supervisor-loss"]);
  run.brim.kill("SIGKILL");
  const exitCode = await run.exited;
  const markedUnguarded = await until(() => runMeta(store)?.unguarded_since !== undefined, 5_000);
  const keptRunning = groupMembers(run.jobPid).length > 0;
  for (const pid of groupMembers(run.jobPid)) process.kill(pid, "SIGKILL");
  await until(() => runMeta(store)?.end != null, 5_000);
  const meta = runMeta(store);
  return {
    fault: "sigkill-brim-keep",
    orphans: groupMembers(run.jobPid).length,
    unguarded: keptRunning && !markedUnguarded ? 1 : 0,
    torn: tornIn(store),
    stackTrace: STACK.test(run.stderr()),
    exitCode,
    endCause: meta?.end?.cause ?? null,
    stderr: run.stderr(),
    keptRunning,
    markedUnguarded,
  };
}

/** SIGHUP to brim (its terminal closed): the job is stopped and the run finished. */
export async function hangUpBrim(dir: string): Promise<FaultOutcome> {
  const store = join(dir, "store");
  const run = await startQuietRun(store, dir);
  run.brim.kill("SIGHUP");
  const exitCode = await run.exited;
  await until(() => groupMembers(run.jobPid).length === 0 && runMeta(store)?.end != null, 8_000);
  const orphans = groupMembers(run.jobPid).length;
  for (const pid of groupMembers(run.jobPid)) process.kill(pid, "SIGKILL");
  const meta = runMeta(store);
  return {
    fault: "sighup-brim",
    orphans,
    unguarded: orphans,
    torn: tornIn(store),
    stackTrace: STACK.test(run.stderr()),
    exitCode,
    endCause: meta?.end?.cause ?? null,
    stderr: run.stderr(),
  };
}

/** True where this machine lets an unprivileged test mount a tmpfs in its own namespaces (`unshare -rm`). */
export function canMountTmpfs(): boolean {
  const probe = spawnSync("unshare", ["-rm", "sh", "-c", 'd=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d" && umount "$d"; s=$?; rmdir "$d"; exit $s'], {
    encoding: "utf8",
    timeout: scaled(10_000),
  });
  return probe.status === 0;
}

/**
 * `brim run` with its store on a tmpfs of `size` (its own mount namespace): a store full at start
 * (small size) or one that fills mid-run (a job that prints a lot). Returns what was left on it.
 */
export function fullDisk(dir: string, size: string, lines: number, readOnly = false): FaultOutcome {
  mkdirSync(dir, { recursive: true });
  const store = join(dir, "tmpfs");
  mkdirSync(store, { recursive: true });
  const job = `i=0; while [ $i -lt ${lines} ]; do echo "line $i of a job that prints a lot, padding padding padding"; i=$((i+1)); done; sleep 20`;
  // The tmpfs lives only in the namespace: the script copies what is on it out before it ends.
  const script = [
    `mount -t tmpfs -o size=${size}${readOnly ? ",ro" : ""} tmpfs "${store}"`,
    `node "${BRIM}" run --quiet --grace 1 --store "${store}" -- sh -c '${job}' >"${dir}/stdout" 2>"${dir}/stderr"; echo $? >"${dir}/rc"`,
    `mkdir -p "${dir}/left" && cp -a "${store}/." "${dir}/left/"`,
  ].join("\n");
  spawnSync("unshare", ["-rm", "sh", "-c", script], {
    cwd: dir,
    timeout: scaled(60_000),
    env: { ...process.env, PATH: `${resolve(process.execPath, "..")}:${process.env.PATH ?? ""}` },
  });
  const stderr = readFileSync(join(dir, "stderr"), "utf8");
  const exitCode = Number(readFileSync(join(dir, "rc"), "utf8").trim());
  const left = join(dir, "left");
  const meta = runMeta(left);
  const jobPid = Number(/pid (\d+)/.exec(stderr)?.[1] ?? 0);
  const orphans = jobPid > 0 ? groupMembers(jobPid).length : 0;
  for (const pid of jobPid > 0 ? groupMembers(jobPid) : []) process.kill(pid, "SIGKILL");
  return {
    fault: readOnly ? "read-only-store" : `disk-full-${size}`,
    orphans,
    unguarded: orphans,
    torn: tornIn(left),
    stackTrace: STACK.test(stderr),
    exitCode,
    endCause: meta?.end?.cause ?? null,
    stderr,
  };
}

/**
 * A job that reports steps through the SDK (and counts them in a side file) loses brim to `signal`
 * mid-run: how many of the steps it reported are missing from the timeline.
 */
export async function stepsLostOn(
  dir: string,
  signal: "SIGHUP" | "SIGKILL",
  python = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3",
): Promise<FaultOutcome & { stepsReported: number; stepsLost: number }> {
  mkdirSync(dir, { recursive: true });
  const store = join(dir, "store");
  const side = join(dir, "steps.txt");
  const script = [
    "import brim, time",
    `side = open(${JSON.stringify(side)}, "a", buffering=1)`,
    "i = 0",
    "while True:",
    "    brim.report_step(samples=8, wait_s=0.001, compute_s=0.01)",
    "    side.write(f'{i}\\n'); i += 1",
    "    time.sleep(0.01)",
  ].join("\n");
  const child = spawn(process.execPath, [BRIM, "run", "--store", store, "--quiet", "--grace", "1", "--", python, "-c", script], {
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  child.stdout?.resume();
  const exited = new Promise<number | null>((r) => child.once("exit", (code, sig) => r(code ?? (sig ? 128 : null))));
  const stepsInSide = (): number =>
    existsSync(side)
      ? readFileSync(side, "utf8")
          .split("\n")
          .filter((l) => l !== "").length
      : 0;
  await until(() => stepsInSide() >= 40, 20_000);
  const jobPid = Number(/pid (\d+)/.exec(stderr)?.[1] ?? 0);
  child.kill(signal);
  const exitCode = await exited;
  await until(() => (jobPid === 0 || groupMembers(jobPid).length === 0) && runMeta(store)?.end != null, 8_000);
  const orphans = jobPid > 0 ? groupMembers(jobPid).length : 0;
  for (const pid of jobPid > 0 ? groupMembers(jobPid) : []) process.kill(pid, "SIGKILL");
  const reported = stepsInSide();
  const dirOfRun = runDirOf(store);
  const timeline = dirOfRun === null ? "" : readFileSync(join(dirOfRun, "timeline.ndjson"), "utf8");
  const recorded = timeline.split("\n").filter((l) => l.includes('"kind":"step"')).length;
  const meta = runMeta(store);
  return {
    fault: `steps-${signal.toLowerCase()}-brim`,
    orphans,
    unguarded: orphans,
    torn: tornIn(store),
    stackTrace: STACK.test(stderr),
    exitCode,
    endCause: meta?.end?.cause ?? null,
    stderr,
    stepsReported: reported,
    stepsLost: Math.max(0, reported - recorded),
  };
}
