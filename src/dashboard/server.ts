/**
 * `brim dashboard`'s web server: node:http, read-only, no framework. Pages for the store's runs and
 * tunes, JSON under /api, and server-sent event streams of live runs (bounded: see ./streams.ts).
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
import { diagnose } from "../analyze/doctor/index.ts";
import { measureRun } from "../analyze/measure.ts";
import { BrimError } from "../errors/index.ts";
import { isRecordId, type RunStore } from "../record/store.ts";
import { loadRun } from "../record/load.ts";
import { listRuns, listTunes, runStatus, runView, tuneView } from "./data.ts";
import { comparePage, errorPage, indexPage, runPage, tunePage } from "./pages.ts";
import { progressAxis } from "../report/progress.ts";
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

interface Reply {
  status: number;
  type: string;
  body: string;
  headers?: Record<string, string>;
}

function securityHeaders(nonce: string): Record<string, string> {
  return {
    "Content-Security-Policy": `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'`,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
  };
}

/** `?y=log` / `?y=linear` on a run page: the loss chart's scale (anything else: automatic). */
function lossScaleParam(url: URL): { lossScale?: "linear" | "log10" } {
  const y = url.searchParams.get("y");
  return y === "log" ? { lossScale: "log10" } : y === "linear" ? { lossScale: "linear" } : {};
}

function json(status: number, value: unknown): Reply {
  return { status, type: "application/json; charset=utf-8", body: JSON.stringify(value, null, 2) };
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
  const store = options.store;
  const host = options.host ?? "127.0.0.1";
  const loopback = isLoopback(host);
  const stored = options.token === undefined ? await storeToken(store.root) : null;
  const token = stored !== null ? stored.token : (options.token ?? null);
  if (!loopback && token === null) throw new BrimError("E_INPUT", `--host ${host} is reachable from other machines: the dashboard needs a token there`);
  const streams = new StreamHub(store, {
    maxStreams: options.maxStreams ?? DEFAULT_MAX_STREAMS,
    maxStreamsPerClient: options.maxStreamsPerClient ?? DEFAULT_MAX_STREAMS_PER_CLIENT,
    pollMs: options.pollMs ?? 500,
    chartEveryMs: options.chartEveryMs ?? 1000,
    heartbeatMs: options.heartbeatMs ?? 15000,
    lingerMs: options.lingerMs,
    onError: options.onError,
  });
  let port = 0;

  function authorized(req: IncomingMessage, url: URL): { ok: boolean; setCookie: boolean } {
    if (token === null) return { ok: true, setCookie: false };
    const query = url.searchParams.get("token");
    if (query !== null && sameToken(query, token)) return { ok: true, setCookie: cookieToken(req) !== token };
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
    if (bearer !== undefined && sameToken(bearer, token)) return { ok: true, setCookie: false };
    const cookie = cookieToken(req);
    return { ok: cookie !== null && sameToken(cookie, token), setCookie: false };
  }

  function hostAllowed(req: IncomingMessage): boolean {
    if (!loopback) return true;
    const name = hostName(req.headers.host);
    return name !== null && isLoopback(name);
  }

  /** What a route is handed: the request, its URL and path segments, and the page's nonce. */
  interface Call {
    req: IncomingMessage;
    res: ServerResponse;
    url: URL;
    nonce: string;
    /** the path's segments after the route's fixed ones: ids, the events verb */
    params: string[];
    notFound: (message: string) => Reply;
  }
  const html = (body: string): Reply => ({ status: 200, type: "text/html; charset=utf-8", body });
  // each route: its fixed segments, how many id segments follow, and what answers; an id is checked before the handler runs
  const routes: { path: string[]; ids: number; tail?: string; kind: "run" | "tune"; answer: (call: Call) => Promise<Reply | null> }[] = [
    { path: [], ids: 0, kind: "run", answer: async ({ nonce }) => html(indexPage(await listRuns(store), await listTunes(store), store.root, nonce)) },
    {
      path: ["runs"],
      ids: 1,
      kind: "run",
      answer: async ({ url, nonce, params: [id], notFound }) => {
        const vsId = url.searchParams.get("vs");
        if (vsId !== null && !isRecordId(vsId)) return notFound(`?vs=${vsId}: not a run id`);
        const vs = vsId === null ? null : await loadRun(store, vsId);
        return html(
          runPage(await runView(store, id as string), store.root, nonce, { axis: progressAxis(url.searchParams.get("x")), vs, ...lossScaleParam(url) }),
        );
      },
    },
    {
      path: ["compare"],
      ids: 0,
      kind: "run",
      answer: async ({ url, nonce, notFound }) => {
        // ?run=<id>&run=<id>… (or runs=<id>,<id>): the runs to overlay, at most 8, each once, oldest first (the first colour)
        const ids = [...new Set([...url.searchParams.getAll("run"), ...(url.searchParams.get("runs") ?? "").split(",")].filter((id) => id !== ""))].sort();
        const bad = ids.find((id) => !isRecordId(id));
        if (bad !== undefined) return notFound(`'${bad}' is not a run id`);
        if (ids.length > 8) return notFound(`${ids.length} runs asked for: the compare page overlays 8 at most`);
        const picked = await Promise.all(ids.map((id) => loadRun(store, id)));
        return html(comparePage(await listRuns(store), picked, store.root, nonce, { axis: progressAxis(url.searchParams.get("x")), ...lossScaleParam(url) }));
      },
    },
    {
      path: ["tunes"],
      ids: 1,
      kind: "tune",
      answer: async ({ nonce, params: [id] }) => html(tunePage(await tuneView(store, id as string), store.root, nonce)),
    },
    { path: ["api", "runs"], ids: 0, kind: "run", answer: async () => json(200, await listRuns(store)) },
    {
      path: ["api", "runs"],
      ids: 1,
      kind: "run",
      answer: async ({ params: [id] }) => {
        const { meta, timeline } = await loadRun(store, id as string);
        return json(200, { meta, ...(await runStatus(store, meta, Date.now() / 1000)), measures: measureRun(meta, timeline) });
      },
    },
    {
      path: ["api", "runs"],
      ids: 1,
      tail: "doctor",
      kind: "run",
      answer: async ({ params: [id] }) => {
        const { meta, timeline } = await loadRun(store, id as string);
        return json(200, diagnose(meta, timeline));
      },
    },
    {
      path: ["api", "runs"],
      ids: 1,
      tail: "events",
      kind: "run",
      answer: async ({ req, res, url, params: [id] }) => {
        const refused = streams.admit(req);
        if (refused !== null) return { ...json(refused.status, { error: refused.message }), headers: { "Retry-After": "5" } };
        const asked = Number(req.headers["last-event-id"] ?? url.searchParams.get("from") ?? 0);
        await streams.serve(req, res, id as string, Number.isSafeInteger(asked) && asked >= 0 ? asked : 0);
        return null;
      },
    },
    { path: ["api", "tunes"], ids: 0, kind: "tune", answer: async () => json(200, await listTunes(store)) },
    { path: ["api", "tunes"], ids: 1, kind: "tune", answer: async ({ params: [id] }) => json(200, await store.readTune(id as string)) },
  ];

  async function route(req: IncomingMessage, res: ServerResponse, url: URL, nonce: string): Promise<Reply | null> {
    const path = url.pathname;
    const wantsJson = path.startsWith("/api/");
    const notFound = (message: string): Reply =>
      wantsJson ? json(404, { error: message }) : { status: 404, type: "text/html; charset=utf-8", body: errorPage(404, message, store.root, nonce) };
    const segments = (path === "/" || path === "" ? [] : path.split("/").slice(1)).map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return "\0";
      }
    });
    for (const r of routes) {
      const length = r.path.length + r.ids + (r.tail === undefined ? 0 : 1);
      if (segments.length !== length || r.path.some((part, i) => segments[i] !== part)) continue;
      if (r.tail !== undefined && segments[length - 1] !== r.tail) continue;
      const params = segments.slice(r.path.length, r.path.length + r.ids);
      const bad = params.find((id) => !isRecordId(id));
      if (bad !== undefined) return notFound(`'${bad}' is not a ${r.kind} id`);
      return r.answer({ req, res, url, nonce, params, notFound });
    }
    return notFound(`nothing at ${path}`);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const nonce = randomBytes(16).toString("base64");
    const headers = securityHeaders(nonce);
    const reply = (r: Reply): void => {
      res.writeHead(r.status, { ...headers, "Content-Type": r.type, "Content-Length": Buffer.byteLength(r.body), ...(r.headers ?? {}) });
      res.end(req.method === "HEAD" ? undefined : r.body);
    };
    const text = (status: number, message: string, extra?: Record<string, string>): void =>
      reply({ status, type: "text/plain; charset=utf-8", body: `${message}\n`, headers: extra });
    if (req.method !== "GET" && req.method !== "HEAD") return text(405, "the dashboard is read-only: GET and HEAD only", { Allow: "GET, HEAD" });
    const raw = req.url ?? "/";
    if (DOT_DOT.test(raw)) return text(400, "paths with '..' are refused");
    let url: URL;
    try {
      url = new URL(raw, "http://dashboard.invalid");
    } catch {
      return text(400, "bad URL");
    }
    if (!hostAllowed(req)) return text(403, `the dashboard answers to 127.0.0.1:${port} and localhost:${port} only`);
    const auth = authorized(req, url);
    if (!auth.ok)
      return text(401, "this dashboard needs its token: open the URL brim dashboard printed (…/?token=…)", {
        "WWW-Authenticate": 'Bearer realm="brim dashboard"',
      });
    if (auth.setCookie && token !== null) res.setHeader("Set-Cookie", `${TOKEN_COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/`);
    try {
      const r = await route(req, res, url, nonce);
      if (r !== null) reply(r);
    } catch (error) {
      if (res.headersSent) {
        res.end();
        return;
      }
      if (error instanceof BrimError) {
        // A record that does not read (damaged, from a newer brim, unreadable) is the store's state, not
        // a fault of the dashboard: a one-line answer, no stack trace, nothing to report.
        const status = error.code === "E_NOT_FOUND" || error.code === "E_INPUT" ? 404 : error.code === "E_PARSE" ? 422 : 503;
        const api = url.pathname.startsWith("/api/");
        return reply(
          api
            ? json(status, { error: error.message, ...(status === 422 ? { damaged: true } : {}) })
            : { status, type: "text/html; charset=utf-8", body: errorPage(status, error.message, store.root, nonce) },
        );
      }
      options.onError?.(error);
      return text(500, `internal error: ${(error as Error).message}`);
    }
  }

  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve, reject) => {
    const fail = (error: NodeJS.ErrnoException): void => {
      const why =
        error.code === "EADDRINUSE"
          ? `port ${options.port ?? DEFAULT_PORT} is in use: pass --port 0 for any free port, or another port`
          : error.code === "EADDRNOTAVAIL"
            ? `address ${host} is not an address of this machine`
            : error.code === "EACCES"
              ? `no permission to listen on ${host}:${options.port ?? DEFAULT_PORT} (ports below 1024 need root)`
              : error.message;
      reject(new BrimError("E_IO", `cannot start the dashboard: ${why}`, { cause: error }));
    };
    server.once("error", fail);
    server.listen(options.port ?? DEFAULT_PORT, host, () => {
      server.off("error", fail);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  const shown = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  const url = `http://${shown}:${port}/${token !== null ? `?token=${encodeURIComponent(token)}` : ""}`;
  let closing: Promise<void> | null = null;
  return {
    url,
    host,
    port,
    token,
    tokenFile: stored?.path ?? null,
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
