/**
 * `brim dashboard`'s web server: node:http, read-only, no framework. Pages for the store's runs and
 * tunes, JSON under /api, and server-sent event streams of live runs (bounded: see ./streams.ts);
 * which path answers what is the table in ./routes.ts, and this file checks every request first.
 *
 * Safety: ids from URLs pass {@link isRecordId} before any file is touched; paths with `..` are
 * refused; only GET and HEAD are served; on loopback the Host header must name loopback (no DNS
 * rebinding); every request needs the store's token (printed in the URL), loopback included: on a
 * shared machine every local user reaches loopback.
 *
 * @module
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { BrimError } from "../errors/index.ts";
import type { RunStore } from "../record/store.ts";
import { errorPage } from "./pages.ts";
import { html, json, route, type Reply, type Site } from "./routes.ts";
import { StreamHub } from "./streams.ts";
import { storeToken } from "./token.ts";

/**
 * Options of {@link startDashboard}.
 *
 * @example
 * ```ts
 * const options: DashboardOptions = { store: new RunStore(".brim"), host: "127.0.0.1", port: 0 };
 * ```
 */
export interface DashboardOptions {
  store: RunStore;
  /** default 127.0.0.1 */
  host?: string;
  /** default 7878; 0 picks a free port */
  port?: number;
  /**
   * the access token; default: the store's own ({@link storeToken}: made once, kept 0600 in the
   * store), on loopback too, since every local user can reach loopback; `null`: none (loopback only)
   */
  token?: string | null;
  /** how often a stream looks for new timeline lines (ms) */
  pollMs?: number;
  /** at most one chart update per stream per this many ms */
  chartEveryMs?: number;
  /** a comment line on idle streams this often (ms), so proxies and browsers keep them open */
  heartbeatMs?: number;
  /** live streams open at once, all clients together (default {@link DEFAULT_MAX_STREAMS}); past it: 503 */
  maxStreams?: number;
  /** live streams open at once from one address (default {@link DEFAULT_MAX_STREAMS_PER_CLIENT}); past it: 429 */
  maxStreamsPerClient?: number;
  /** how long a run's shared feed outlives its last client, for reconnects (ms) */
  lingerMs?: number;
  /** where unexpected errors are reported (default: nowhere; the client gets a 500) */
  onError?: (error: unknown) => void;
}

/**
 * A running dashboard.
 *
 * @example
 * ```ts
 * const dash: Dashboard = await startDashboard({ store, port: 0 });
 * await dash.close();
 * ```
 */
export interface Dashboard {
  /** the URL to open, with the token when there is one */
  url: string;
  host: string;
  port: number;
  token: string | null;
  /** the file the token is kept in (0600), null when it was given or could not be kept */
  tokenFile: string | null;
  server: Server;
  /** stops serving: ends the event streams, closes connections */
  close(): Promise<void>;
  /** event streams open now */
  openStreams(): number;
  /** runs followed now: one tail per run, shared by its streams */
  openFeeds(): number;
}

/**
 * The default port of `brim dashboard`.
 *
 * @example
 * ```ts
 * await startDashboard({ store, port: DEFAULT_PORT }); // http://127.0.0.1:7878/
 * ```
 */
export const DEFAULT_PORT = 7878;

/**
 * Live streams one dashboard serves at once; a browser tab holds one.
 *
 * @example
 * ```ts
 * await startDashboard({ store, maxStreams: DEFAULT_MAX_STREAMS });
 * ```
 */
export const DEFAULT_MAX_STREAMS = 64;

/**
 * Live streams one client address may hold at once.
 *
 * @example
 * ```ts
 * await startDashboard({ store, maxStreamsPerClient: DEFAULT_MAX_STREAMS_PER_CLIENT });
 * ```
 */
export const DEFAULT_MAX_STREAMS_PER_CLIENT = 32;

const TOKEN_COOKIE = "brim_token";

/**
 * True for addresses that only this machine can reach.
 *
 * @example
 * ```ts
 * isLoopback("127.0.0.1"); // true
 * isLoopback("0.0.0.0");   // false
 * ```
 */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || host === "[::1]" || /^127(\.\d{1,3}){3}$/.test(host);
}

function sameToken(given: string, token: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

function cookieToken(req: IncomingMessage): string | null {
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const [name, ...value] = part.trim().split("=");
    if (name === TOKEN_COOKIE) return decodeURIComponent(value.join("="));
  }
  return null;
}

function hostName(header: string | undefined): string | null {
  if (header === undefined) return null;
  const m = /^(\[[^\]]+\]|[^:]+)(?::\d+)?$/.exec(header.trim().toLowerCase());
  return m?.[1] ?? null;
}

/** A path segment `..` in any spelling (`..`, `%2e%2e`, `.%2E`), or an encoded slash before one. */
const DOT_DOT = /(^|\/|%2f|\\|%5c)(\.|%2e){2}($|\/|%2f|\\|%5c|\?|#)/i;

function securityHeaders(nonce: string): Record<string, string> {
  return {
    "Content-Security-Policy": `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'`,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
  };
}

/** A running dashboard's state: what the routes read, and what the checks before them need. */
interface DashState extends Site {
  host: string;
  loopback: boolean;
  token: string | null;
  /** the port listened on, once it listens */
  port: number;
  onError?: (error: unknown) => void;
}

function text(status: number, message: string, headers?: Record<string, string>): Reply {
  return { status, type: "text/plain; charset=utf-8", body: `${message}\n`, headers };
}

function authorized(dash: DashState, req: IncomingMessage, url: URL): { ok: boolean; setCookie: boolean } {
  const token = dash.token;
  if (token === null) return { ok: true, setCookie: false };
  const query = url.searchParams.get("token");
  if (query !== null && sameToken(query, token)) return { ok: true, setCookie: cookieToken(req) !== token };
  const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
  if (bearer !== undefined && sameToken(bearer, token)) return { ok: true, setCookie: false };
  const cookie = cookieToken(req);
  return { ok: cookie !== null && sameToken(cookie, token), setCookie: false };
}

function hostAllowed(dash: DashState, req: IncomingMessage): boolean {
  if (!dash.loopback) return true;
  const name = hostName(req.headers.host);
  return name !== null && isLoopback(name);
}

/** The checks before any route, in order: method, `..`, URL, Host header, token. A reply: refused. */
function admit(dash: DashState, req: IncomingMessage): { url: URL; setCookie: boolean } | Reply {
  if (req.method !== "GET" && req.method !== "HEAD") return text(405, "the dashboard is read-only: GET and HEAD only", { Allow: "GET, HEAD" });
  const raw = req.url ?? "/";
  if (DOT_DOT.test(raw)) return text(400, "paths with '..' are refused");
  let url: URL;
  try {
    url = new URL(raw, "http://dashboard.invalid");
  } catch {
    return text(400, "bad URL");
  }
  if (!hostAllowed(dash, req)) return text(403, `the dashboard answers to 127.0.0.1:${dash.port} and localhost:${dash.port} only`);
  const auth = authorized(dash, req, url);
  if (!auth.ok)
    return text(401, "this dashboard needs its token: open the URL brim dashboard printed (…/?token=…)", {
      "WWW-Authenticate": 'Bearer realm="brim dashboard"',
    });
  return { url, setCookie: auth.setCookie };
}

/** What an error thrown by a route answers. */
function failure(dash: DashState, error: unknown, url: URL, nonce: string): Reply {
  if (error instanceof BrimError) {
    // A record that does not read (damaged, from a newer brim, unreadable) is the store's state, not
    // a fault of the dashboard: a one-line answer, no stack trace, nothing to report.
    const status = error.code === "E_NOT_FOUND" || error.code === "E_INPUT" ? 404 : error.code === "E_PARSE" ? 422 : 503;
    return url.pathname.startsWith("/api/")
      ? json(status, { error: error.message, ...(status === 422 ? { damaged: true } : {}) })
      : html(errorPage(status, error.message, dash.store.root, nonce), status);
  }
  dash.onError?.(error);
  return text(500, `internal error: ${(error as Error).message}`);
}

async function handle(dash: DashState, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const nonce = randomBytes(16).toString("base64");
  const headers = securityHeaders(nonce);
  const reply = (r: Reply): void => {
    res.writeHead(r.status, { ...headers, "Content-Type": r.type, "Content-Length": Buffer.byteLength(r.body), ...(r.headers ?? {}) });
    res.end(req.method === "HEAD" ? undefined : r.body);
  };
  const admitted = admit(dash, req);
  if ("status" in admitted) return reply(admitted);
  const { url, setCookie } = admitted;
  if (setCookie && dash.token !== null) res.setHeader("Set-Cookie", `${TOKEN_COOKIE}=${encodeURIComponent(dash.token)}; HttpOnly; SameSite=Strict; Path=/`);
  try {
    const r = await route(dash, req, res, url, nonce);
    if (r !== null) reply(r);
  } catch (error) {
    if (res.headersSent) {
      res.end();
      return;
    }
    return reply(failure(dash, error, url, nonce));
  }
}

/** Listens on `host:port`; a port in use, a foreign address or a privileged port: one line. */
function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const fail = (error: NodeJS.ErrnoException): void => {
      const why =
        error.code === "EADDRINUSE"
          ? `port ${port} is in use: pass --port 0 for any free port, or another port`
          : error.code === "EADDRNOTAVAIL"
            ? `address ${host} is not an address of this machine`
            : error.code === "EACCES"
              ? `no permission to listen on ${host}:${port} (ports below 1024 need root)`
              : error.message;
      reject(new BrimError("E_IO", `cannot start the dashboard: ${why}`, { cause: error }));
    };
    server.once("error", fail);
    server.listen(port, host, () => {
      server.off("error", fail);
      resolve();
    });
  });
}

function streamHub(options: DashboardOptions): StreamHub {
  return new StreamHub(options.store, {
    maxStreams: options.maxStreams ?? DEFAULT_MAX_STREAMS,
    maxStreamsPerClient: options.maxStreamsPerClient ?? DEFAULT_MAX_STREAMS_PER_CLIENT,
    pollMs: options.pollMs ?? 500,
    chartEveryMs: options.chartEveryMs ?? 1000,
    heartbeatMs: options.heartbeatMs ?? 15000,
    lingerMs: options.lingerMs,
    onError: options.onError,
  });
}

/** The handle of a dashboard that listens. */
function dashboardOf(dash: DashState, server: Server, tokenFile: string | null): Dashboard {
  const { host, port, token, streams } = dash;
  const shown = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${shown}:${port}/${token !== null ? `?token=${encodeURIComponent(token)}` : ""}`,
    host,
    port,
    token,
    tokenFile,
    server,
    openStreams: () => streams.open,
    openFeeds: () => streams.feeds,
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve) => {
        streams.close();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

/**
 * Starts the dashboard and resolves once it listens.
 *
 * @example
 * ```ts
 * const dash = await startDashboard({ store: new RunStore(".brim"), port: 0 });
 * console.log(dash.url); // http://127.0.0.1:41234/
 * await dash.close();
 * ```
 */
export async function startDashboard(options: DashboardOptions): Promise<Dashboard> {
  const host = options.host ?? "127.0.0.1";
  const loopback = isLoopback(host);
  const stored = options.token === undefined ? await storeToken(options.store.root) : null;
  const token = stored !== null ? stored.token : (options.token ?? null);
  if (!loopback && token === null) throw new BrimError("E_INPUT", `--host ${host} is reachable from other machines: the dashboard needs a token there`);
  const dash: DashState = { store: options.store, streams: streamHub(options), host, loopback, token, port: 0, onError: options.onError };
  const server = createServer((req, res) => void handle(dash, req, res));
  await listen(server, host, options.port ?? DEFAULT_PORT);
  dash.port = (server.address() as AddressInfo).port;
  return dashboardOf(dash, server, stored?.path ?? null);
}
