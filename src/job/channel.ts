import { randomBytes, timingSafeEqual } from "node:crypto";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BrimError } from "../errors/index.ts";
import { isRunning } from "../files.ts";

/** A message from the SDK (docs/schemas/channel.v1.json): at least `v`, `type`, `t` and `pid`. */
export interface ChannelMessage {
  v: 1;
  type: string;
  t: number;
  pid: number;
  [field: string]: unknown;
}

/** What the server counts about its traffic. */
export interface ChannelStats {
  connections: number;
  open: number;
  messages: number;
  malformed: number;
  unknownVersion: number;
  /** Connections refused: no hello first, a wrong token, or (without a token) a pid outside the job's tree. */
  refused: number;
  /** Connections admitted without a token because their hello's pid is in the job's process tree (SDKs before the token). */
  admittedByPid: number;
  /** Connections closed because the buffers of all connections together passed {@link MAX_BUFFERED_BYTES}, or one line passed {@link MAX_LINE_BYTES}. */
  overflowed: number;
}

/** Who may talk on the channel. */
export interface ChannelAdmission {
  /** The secret the job finds in `BRIM_CHANNEL_TOKEN`; a hello that carries it is admitted. */
  token: string;
  /** For a hello without a token (an SDK from before the token): admit it when this says its pid is the job's. */
  admitPid?: (pid: number) => boolean;
}

/** The longest line the server accepts; a profile message carries every tensor's shape. */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;
/** The most bytes held for incomplete lines over all connections together. */
export const MAX_BUFFERED_BYTES = 64 * 1024 * 1024;

/**
 * Decodes one line of the channel. Returns the message, or why it was dropped.
 *
 * @example
 * ```ts
 * decodeChannelLine('{"v":1,"type":"step","t":1.5,"pid":42,"step":0}'); // { message: {...} }
 * decodeChannelLine("not json");                                         // { dropped: "malformed" }
 * ```
 */
export function decodeChannelLine(line: string): { message: ChannelMessage } | { dropped: "malformed" | "unknown_version" } {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { dropped: "malformed" };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { dropped: "malformed" };
  const record = value as Record<string, unknown>;
  if (record.v !== 1) return { dropped: typeof record.v === "number" ? "unknown_version" : "malformed" };
  if (typeof record.type !== "string" || typeof record.t !== "number" || typeof record.pid !== "number") return { dropped: "malformed" };
  return { message: record as ChannelMessage };
}

/**
 * The server end of the SDK channel: a Unix domain socket (mode 0600) that many processes of one job
 * connect to, each sending newline-delimited JSON, a hello first. With an {@link ChannelAdmission},
 * only a hello that carries the run's token — or, for SDKs that send none, whose pid is in the job's
 * process tree — opens a connection; others are refused and counted. Malformed lines are counted and
 * dropped; memory for incomplete lines is bounded per connection and over all of them; a client that
 * misbehaves is closed, never the server.
 *
 * @example
 * ```ts
 * const channel = await ChannelServer.listen((message) => console.log(message.type));
 * // child env: BRIM_CHANNEL=channel.path
 * channel.broadcast({ v: 1, type: "stop", reason: "budget" });
 * await channel.close();
 * ```
 */
export class ChannelServer {
  readonly path: string;
  #server: Server;
  #sockets = new Set<Socket>();
  #stats: ChannelStats = { connections: 0, open: 0, messages: 0, malformed: 0, unknownVersion: 0, refused: 0, admittedByPid: 0, overflowed: 0 };
  #admission: ChannelAdmission | null;
  #buffered = 0;
  #closed = false;

  private constructor(path: string, server: Server, admission: ChannelAdmission | null) {
    this.path = path;
    this.#server = server;
    this.#admission = admission;
  }

  /**
   * Listens on a fresh socket path in the temp folder (kept short: Linux allows 107 bytes), after
   * removing sockets that brims no longer running left there. The socket is removed again when the
   * server closes and when brim's process exits in any orderly way.
   */
  static async listen(
    onMessage: (message: ChannelMessage) => void,
    where: string | { path?: string; admission?: ChannelAdmission } = {},
  ): Promise<ChannelServer> {
    const options = typeof where === "string" ? { path: where } : where;
    if (options.path === undefined) removeStaleSockets();
    const path = options.path ?? defaultSocketPath();
    const server = createServer();
    const channel = new ChannelServer(path, server, options.admission ?? null);
    server.on("connection", (socket) => channel.#accept(socket, onMessage));
    const previousMask = process.umask(0o177);
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", (error) => reject(new BrimError("E_IO", `cannot open brim's channel socket ${path}: ${error.message}`, { cause: error })));
        server.listen(path, () => resolve());
      });
    } finally {
      process.umask(previousMask);
    }
    server.on("error", () => {});
    liveSockets.add(path);
    return channel;
  }

  /** Traffic counts so far. */
  get stats(): ChannelStats {
    return { ...this.#stats, open: this.#sockets.size };
  }

  /** Sends one message to every connected process; returns how many it reached. */
  broadcast(message: Record<string, unknown>): number {
    const line = `${JSON.stringify(message)}\n`;
    let reached = 0;
    for (const socket of this.#sockets) {
      if (socket.writable) {
        socket.write(line);
        reached++;
      }
    }
    return reached;
  }

  /** Stops listening, closes all connections and removes the socket file. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    rmSync(this.path, { force: true });
    liveSockets.delete(this.path);
  }

  #accept(socket: Socket, onMessage: (message: ChannelMessage) => void): void {
    if (this.#closed) {
      socket.destroy();
      return;
    }
    this.#sockets.add(socket);
    this.#stats.connections++;
    const state = { admitted: this.#admission === null, chunks: [] as Buffer[], held: 0 };
    const release = (): void => {
      this.#buffered -= state.held;
      state.chunks = [];
      state.held = 0;
    };
    const drop = (why: "refused" | "overflowed"): void => {
      this.#stats[why]++;
      release();
      socket.destroy();
    };
    const line = (bytes: Buffer): boolean => {
      const text = bytes.toString("utf8");
      if (state.admitted) {
        this.#take(text, onMessage, socket);
        return true;
      }
      if (text.trim() === "") return true;
      if (!this.#admit(text)) {
        drop("refused");
        return false;
      }
      state.admitted = true;
      this.#take(text, onMessage, socket);
      return true;
    };
    socket.on("data", (chunk: Buffer) => {
      let start = 0;
      let newline = chunk.indexOf(0x0a);
      while (newline !== -1) {
        const piece = chunk.subarray(start, newline);
        const whole = state.held === 0 ? piece : Buffer.concat([...state.chunks, piece]);
        release();
        if (!line(whole)) return;
        start = newline + 1;
        newline = chunk.indexOf(0x0a, start);
      }
      if (start < chunk.length) {
        const rest = chunk.subarray(start);
        if (state.held + rest.length > MAX_LINE_BYTES) {
          this.#stats.malformed++;
          drop("overflowed");
          return;
        }
        if (this.#buffered + rest.length > MAX_BUFFERED_BYTES) {
          drop("overflowed");
          return;
        }
        // Copy: a subarray would keep the whole 64 KiB read buffer alive for a few bytes.
        state.chunks.push(Buffer.from(rest));
        state.held += rest.length;
        this.#buffered += rest.length;
      }
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      if (state.held > 0) {
        const whole = Buffer.concat(state.chunks);
        release();
        if (whole.toString("utf8").trim() !== "") line(whole);
      }
      this.#sockets.delete(socket);
    });
  }

  #admit(firstLine: string): boolean {
    const admission = this.#admission;
    if (admission === null) return true;
    const decoded = decodeChannelLine(firstLine);
    if (!("message" in decoded) || decoded.message.type !== "hello") return false;
    const given = decoded.message.token;
    if (typeof given === "string") return sameSecret(given, admission.token);
    if ((given === undefined || given === null) && admission.admitPid?.(decoded.message.pid) === true) {
      this.#stats.admittedByPid++;
      return true;
    }
    return false;
  }

  #take(line: string, onMessage: (message: ChannelMessage) => void, socket: Socket): void {
    if (line.trim() === "") return;
    const decoded = decodeChannelLine(line);
    if ("dropped" in decoded) {
      if (decoded.dropped === "unknown_version") this.#stats.unknownVersion++;
      else this.#stats.malformed++;
      return;
    }
    delete decoded.message.token;
    this.#stats.messages++;
    try {
      onMessage(decoded.message);
    } catch {
      this.#stats.malformed++;
    }
    // handled: what the process writes after it got this answer (a bar on its stderr) comes after it
    if (decoded.message.type === "event" && decoded.message.ack === true && socket.writable) {
      socket.write(`${JSON.stringify({ v: 1, type: "ack", kind: decoded.message.kind })}\n`);
    }
  }
}

function sameSecret(given: string, token: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

const SOCKET_NAME = /^brim-(\d+)-[0-9a-f]{8}\.sock$/;

function defaultSocketPath(): string {
  return join(tmpdir(), `brim-${process.pid}-${randomBytes(4).toString("hex")}.sock`);
}

// Sockets this process listens on, removed on exit however the event loop ends.
const liveSockets = new Set<string>();
process.once("exit", () => {
  for (const path of liveSockets) rmSync(path, { force: true });
});

/**
 * Removes `brim-<pid>-<hex>.sock` files in the temp folder whose brim no longer runs (left by a brim
 * that was killed). Returns how many it removed.
 *
 * @example
 * ```ts
 * removeStaleSockets(); // 0
 * ```
 */
export function removeStaleSockets(dir: string = tmpdir()): number {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  // A socket some process still listens on is in /proc/net/unix (a brim in another pid namespace
  // sharing this folder looks dead by its pid, but not there).
  let bound = "";
  try {
    bound = readFileSync("/proc/net/unix", "utf8");
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
    const pid = Number(SOCKET_NAME.exec(name)?.[1]);
    if (!Number.isSafeInteger(pid) || pid === process.pid || isRunning(pid) || bound.includes(join(dir, name))) continue;
    try {
      rmSync(join(dir, name), { force: true });
      removed++;
    } catch {
      // Not ours to remove.
    }
  }
  return removed;
}
