import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BrimError } from "../errors/index.ts";

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
}

/** The longest line the server accepts; a profile message carries every tensor's shape. */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;

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
 * The server end of the SDK channel: a Unix domain socket that many processes of one job connect
 * to, each sending newline-delimited JSON. Malformed lines are counted and dropped; a client that
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
  #stats: ChannelStats = { connections: 0, open: 0, messages: 0, malformed: 0, unknownVersion: 0 };

  private constructor(path: string, server: Server) {
    this.path = path;
    this.#server = server;
  }

  /** Listens on a fresh socket path in the temp folder (kept short: Linux allows 107 bytes). */
  static async listen(onMessage: (message: ChannelMessage) => void, path: string = defaultSocketPath()): Promise<ChannelServer> {
    const server = createServer();
    const channel = new ChannelServer(path, server);
    server.on("connection", (socket) => channel.#accept(socket, onMessage));
    await new Promise<void>((resolve, reject) => {
      server.once("error", (error) => reject(new BrimError("E_IO", `cannot open brim's channel socket ${path}: ${error.message}`, { cause: error })));
      server.listen(path, () => resolve());
    });
    server.on("error", () => {});
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
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    rmSync(this.path, { force: true });
  }

  #accept(socket: Socket, onMessage: (message: ChannelMessage) => void): void {
    this.#sockets.add(socket);
    this.#stats.connections++;
    let buffered = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      buffered += chunk;
      let newline = buffered.indexOf("\n");
      while (newline !== -1) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        this.#take(line, onMessage);
        newline = buffered.indexOf("\n");
      }
      if (buffered.length > MAX_LINE_BYTES) {
        this.#stats.malformed++;
        buffered = "";
        socket.destroy();
      }
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      if (buffered.trim() !== "") this.#take(buffered, onMessage);
      this.#sockets.delete(socket);
    });
  }

  #take(line: string, onMessage: (message: ChannelMessage) => void): void {
    if (line.trim() === "") return;
    const decoded = decodeChannelLine(line);
    if ("dropped" in decoded) {
      if (decoded.dropped === "unknown_version") this.#stats.unknownVersion++;
      else this.#stats.malformed++;
      return;
    }
    this.#stats.messages++;
    try {
      onMessage(decoded.message);
    } catch {
      this.#stats.malformed++;
    }
  }
}

function defaultSocketPath(): string {
  return join(tmpdir(), `brim-${process.pid}-${randomBytes(4).toString("hex")}.sock`);
}
