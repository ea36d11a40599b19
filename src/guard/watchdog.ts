/**
 * The watchdog that keeps a job from outliving its guard. brim starts it before the job, in its own
 * session, with one pipe from brim as its stdin and nothing else. When brim goes away in any manner
 * (a crash, SIGKILL, a lost terminal, a full disk it could not survive) the kernel closes that pipe;
 * the watchdog reads end-of-file without the `done` line brim sends when it finished the run itself,
 * and then stops the job's process group (SIGTERM, SIGKILL after the grace period) — or, when the
 * user asked for it, lets it run on with the record saying it is unguarded — and finishes run.json
 * with the cause `supervisor_lost`. It works for any job (no SDK, no Python needed).
 *
 * @module
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";

/** What the watchdog looks after. */
export interface WatchdogOptions {
  /** The run's folder (run.json, timeline.ndjson), finished by the watchdog when brim is lost. */
  runDir: string;
  /** Seconds between SIGTERM and SIGKILL. */
  graceS: number;
  /** Let the job run on when brim is lost, recording that it is unguarded. */
  keep: boolean;
  /** The channel socket to remove when brim is lost. */
  socketPath?: string;
  /** Seconds between two looks at the job's group (default 1). */
  pollS?: number;
}

// Runs as `node -e`: standard library only, CommonJS, no file of brim's needed at run time.
const WATCHDOG_JS = String.raw`
const fs = require("node:fs");
const path = require("node:path");
const [runDir, graceArg, keepArg, socketArg, pollArg] = process.argv.slice(2);
let socketPath = socketArg;
const graceMs = Math.max(0, Number(graceArg) * 1000);
const pollMs = Math.max(50, Number(pollArg) * 1000);
const keep = keepArg === "1";
for (const s of ["SIGINT", "SIGHUP", "SIGTERM", "SIGPIPE"]) process.on(s, () => {});
let pgid = null, done = false, input = "";
const removals = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function groupAlive(g) {
  try { process.kill(-g, 0); } catch (e) { if (e.code !== "EPERM") return false; }
  let names; try { names = fs.readdirSync("/proc"); } catch { return true; }
  for (const n of names) {
    if (!/^\d+$/.test(n)) continue;
    let st; try { st = fs.readFileSync("/proc/" + n + "/stat", "utf8"); } catch { continue; }
    const f = st.slice(st.lastIndexOf(")") + 2).split(" ");
    if (Number(f[2]) === g && f[0] !== "Z" && f[0] !== "X") return true;
  }
  return false;
}
function signal(g, s) { try { process.kill(-g, s); } catch {} }
// The job's processes outside its group (double-forked daemons) carry BRIM_RUN_ID=<run id>: src/guard/escapes.ts.
function marked() {
  const mark = Buffer.from("BRIM_RUN_ID=" + path.basename(runDir) + "\0"), out = [];
  let names; try { names = fs.readdirSync("/proc"); } catch { return out; }
  for (const n of names) {
    if (!/^\d+$/.test(n) || Number(n) === process.pid) continue;
    try {
      const st = fs.readFileSync("/proc/" + n + "/stat", "utf8"), f = st.slice(st.lastIndexOf(")") + 2).split(" ");
      if (Number(f[2]) === pgid || f[0] === "Z" || f[0] === "X") continue;
      const env = fs.readFileSync("/proc/" + n + "/environ");
      if (env.indexOf(mark) === 0 || env.indexOf(Buffer.concat([Buffer.from([0]), mark])) >= 0) out.push(Number(n));
    } catch {}
  }
  return out;
}
async function stopMarked() {
  let stopped = 0;
  for (let round = 0; round < 3; round++) {
    const pids = marked();
    if (pids.length === 0) break;
    stopped += pids.length;
    for (const p of pids) try { process.kill(p, "SIGTERM"); } catch {}
    const deadline = Date.now() + Math.min(graceMs, 5000);
    while (marked().length > 0 && Date.now() < deadline) await sleep(100);
    for (const p of marked()) try { process.kill(p, "SIGKILL"); } catch {}
    await sleep(100);
  }
  return stopped;
}
function writeAtomic(file, text) {
  const tmp = path.join(path.dirname(file), "." + path.basename(file) + ".brim-tmp-" + process.pid + "-" + Math.random().toString(16).slice(2, 14).padEnd(12, "0"));
  try {
    const fd = fs.openSync(tmp, "wx", 0o600);
    try { fs.writeFileSync(fd, text); fs.fsyncSync(fd); } finally { fs.closeSync(fd); }
    fs.renameSync(tmp, file);
    try { const d = fs.openSync(path.dirname(file), "r"); try { fs.fsyncSync(d); } finally { fs.closeSync(d); } } catch {}
    return true;
  } catch { try { fs.unlinkSync(tmp); } catch {} return false; }
}
function readMeta() { try { return JSON.parse(fs.readFileSync(path.join(runDir, "run.json"), "utf8")); } catch { return null; } }
function writeMeta(meta) {
  const file = path.join(runDir, "run.json");
  const text = JSON.stringify(meta, null, 2) + "\n";
  if (writeAtomic(file, text)) return;
  try { fs.rmSync(path.join(runDir, ".brim-reserve"), { force: true }); } catch {}
  writeAtomic(file, text);
}
function appendLine(entry) {
  const file = path.join(runDir, "timeline.ndjson");
  let fd;
  try {
    fd = fs.openSync(file, "r+");
    const size = fs.fstatSync(fd).size;
    let keepTo = size;
    if (size > 0) {
      // A line brim was writing when it died is cut back to the last whole one.
      const span = Math.min(size, 1 << 20), buf = Buffer.alloc(span);
      fs.readSync(fd, buf, 0, span, size - span);
      const nl = buf.lastIndexOf(10);
      keepTo = nl < 0 ? (span === size ? 0 : size) : size - span + nl + 1;
      if (keepTo !== size) fs.ftruncateSync(fd, keepTo);
    }
    const bytes = Buffer.from(JSON.stringify(entry) + "\n");
    const n = fs.writeSync(fd, bytes, 0, bytes.length, keepTo);
    if (n !== bytes.length) fs.ftruncateSync(fd, keepTo);
    fs.fsyncSync(fd);
  } catch {} finally { if (fd !== undefined) try { fs.closeSync(fd); } catch {} }
}
function cleanup() {
  if (socketPath) try { fs.rmSync(socketPath, { force: true }); } catch {}
  for (const file of removals) try { fs.rmSync(file, { force: true }); } catch {}
  try { fs.rmSync(path.join(runDir, ".brim-reserve"), { force: true }); } catch {}
}
async function lost() {
  const lostAt = new Date();
  const meta = readMeta();
  const now = () => Date.now() / 1000;
  if (meta !== null && meta.end != null) { cleanup(); return; }
  let end;
  if (pgid === null) {
    end = { cause: "supervisor_lost", exit_code: null, signal: null, message: "brim was lost before the job started; nothing ran" };
  } else if (!groupAlive(pgid)) {
    const left = keep ? 0 : await stopMarked();
    end = { cause: "supervisor_lost", exit_code: null, signal: null, message: "the job ended, but brim was lost before it recorded how (exit status unknown); the timeline up to then is kept" + (left > 0 ? "; " + left + " process(es) left behind by the job were stopped" : "") };
  } else if (keep) {
    const message = "brim stopped guarding the job (it exited or was killed); the job runs on UNGUARDED as asked (--keep-on-supervisor-loss): no cap, no hang check, no timeline";
    appendLine({ t: now(), kind: "event", event: "supervisor_lost", pid: null, step: null, message, details: { pgid, kept: true } });
    if (meta !== null) writeMeta({ ...meta, unguarded_since: lostAt.toISOString() });
    if (socketPath) try { fs.rmSync(socketPath, { force: true }); } catch {}
    while (groupAlive(pgid)) await sleep(pollMs);
    end = { cause: "supervisor_lost", exit_code: null, signal: null, message: "brim was lost at " + lostAt.toISOString() + "; the job ran on unguarded until it ended (exit status unknown)" };
  } else {
    signal(pgid, "SIGTERM");
    let sent = "SIGTERM";
    const deadline = Date.now() + graceMs;
    while (groupAlive(pgid) && Date.now() < deadline) await sleep(50);
    if (groupAlive(pgid)) { signal(pgid, "SIGKILL"); sent = "SIGKILL"; }
    const killDeadline = Date.now() + 5000;
    while (groupAlive(pgid) && Date.now() < killDeadline) await sleep(20);
    const left = await stopMarked();
    appendLine({ t: now(), kind: "event", event: "supervisor_lost", pid: null, step: null, message: "brim stopped guarding the job (it exited or was killed); its watchdog stopped the job", details: { pgid, signal: sent } });
    end = { cause: "supervisor_lost", exit_code: null, signal: sent, message: "brim stopped guarding the job (it exited or was killed), so its watchdog stopped the job with " + sent + (left > 0 ? " and " + left + " process(es) it had left behind" : "") + "; the timeline up to then is kept" };
  }
  const endedAt = new Date();
  appendLine({ t: endedAt.getTime() / 1000, kind: "end", cause: end.cause, exit_code: end.exit_code, signal: end.signal });
  const latest = readMeta() ?? meta;
  if (latest !== null && latest.end == null) writeMeta({ ...latest, ended_at: endedAt.toISOString(), end });
  cleanup();
}
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  input += chunk;
  let i;
  while ((i = input.indexOf("\n")) >= 0) {
    const line = input.slice(0, i); input = input.slice(i + 1);
    if (line.startsWith("arm ")) pgid = Number(line.slice(4));
    else if (line.startsWith("socket ")) socketPath = line.slice(7);
    else if (line.startsWith("remove ")) removals.push(line.slice(7));
    else if (line === "done") done = true;
  }
});
process.stdin.on("error", () => {});
process.stdin.on("close", () => { if (done) process.exit(0); lost().then(() => process.exit(0), () => process.exit(1)); });
`;

// Where brim is one executable (Node's single-executable applications), `node -e` is not there: a
// shell does the stopping, and the next look at the record shows it unfinished.
const WATCHDOG_SH = String.raw`
trap '' HUP INT TERM PIPE
pgid=""; done=""; sock="$4"; removals=""
nl='
'
while IFS= read -r line; do
  case "$line" in "arm "*) pgid="${"${"}line#arm }";; "socket "*) sock="${"${"}line#socket }";; "remove "*) removals="$removals${"${"}line#remove }$nl";; done) done=1;; esac
done
[ -n "$done" ] && exit 0
[ -n "$sock" ] && rm -f "$sock"
printf '%s' "$removals" | while IFS= read -r f; do rm -f "$f"; done
[ -z "$pgid" ] && exit 0
[ "$3" = 1 ] && exit 0
kill -TERM -"$pgid" 2>/dev/null || exit 0
g="${"${"}2%%.*}"; [ -n "$g" ] || g=0
i=0; while kill -0 -"$pgid" 2>/dev/null && [ "$i" -lt "$(( g * 10 + 10 ))" ]; do sleep 0.1; i=$((i+1)); done
kill -KILL -"$pgid" 2>/dev/null
exit 0
`;

function isSingleExecutable(): boolean {
  try {
    const sea = createRequire(import.meta.url)("node:sea") as { isSea?: () => boolean };
    return sea.isSea?.() === true;
  } catch {
    return false;
  }
}

/**
 * A started watchdog. {@link Watchdog.arm} names the job's process group once it runs;
 * {@link Watchdog.release} tells it brim finished the run itself (it then exits and touches nothing).
 *
 * @example
 * ```ts
 * const dog = Watchdog.start({ runDir: writer.dir, graceS: 10, keep: false, socketPath: job.channel.path });
 * dog.arm(job.pid);
 * // ... the run, then run.json finished by brim:
 * dog.release();
 * ```
 */
export class Watchdog {
  readonly pid: number | undefined;
  #child: ChildProcess;
  #released = false;

  private constructor(child: ChildProcess) {
    this.#child = child;
    this.pid = child.pid;
  }

  /**
   * Starts the watchdog process; it waits, idle, on its stdin. `shell` forces the `/bin/sh` variant
   * that a single-executable brim uses (it stops the job but leaves the record unfinished).
   */
  static start(options: WatchdogOptions, shell: boolean = isSingleExecutable()): Watchdog {
    const args = [options.runDir, String(options.graceS), options.keep ? "1" : "0", options.socketPath ?? "", String(options.pollS ?? 1)];
    const child = shell
      ? spawn("/bin/sh", ["-c", WATCHDOG_SH, "brim-watchdog", ...args], { detached: true, stdio: ["pipe", "ignore", "ignore"] })
      : spawn(process.execPath, ["--max-old-space-size=32", "-e", "eval(process.env.BRIM_WATCHDOG_JS)", "brim-watchdog", ...args], {
          detached: true,
          stdio: ["pipe", "ignore", "ignore"],
          env: { BRIM_WATCHDOG_JS: WATCHDOG_JS },
        });
    child.on("error", () => {});
    child.stdin?.on("error", () => {});
    child.unref();
    (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    return new Watchdog(child);
  }

  /** Names the job's process group, and the channel socket to remove when brim is lost. */
  arm(pgid: number, socketPath?: string): void {
    if (socketPath !== undefined && !socketPath.includes("\n")) this.#send(`socket ${socketPath}\n`);
    this.#send(`arm ${pgid}\n`);
  }

  /**
   * A file brim would remove at the run's end (a config copy that carries a trial's values): the
   * watchdog removes it when brim is lost, so a killed brim leaves no copy behind.
   */
  removeOnLoss(path: string): void {
    if (!path.includes("\n")) this.#send(`remove ${path}\n`);
  }

  /** brim finished the run itself: the watchdog exits without touching the job or the record. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#send("done\n");
    this.#child.stdin?.end();
  }

  /** Closes the pipe without `done`, exactly what brim's death does (for tests and drills). */
  abandon(): void {
    this.#released = true;
    this.#child.stdin?.destroy();
  }

  #send(line: string): void {
    const stdin = this.#child.stdin;
    if (stdin && !stdin.destroyed && stdin.writable) stdin.write(line);
  }
}
