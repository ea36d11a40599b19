/**
 * The dashboard's routes: one table of paths, each answered by a small handler that takes a
 * {@link RouteContext}. Ids in a path are checked with {@link isRecordId} before a handler runs;
 * the server (./server.ts) checks the method, the Host header and the token before routing.
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { diagnose } from "../analyze/doctor/index.ts";
import { measureRun } from "../analyze/measure.ts";
import { isRecordId, type RunStore } from "../record/store.ts";
import { loadRun } from "../record/load.ts";
import { listRuns, listTunes, runStatus, runView, tuneView } from "./data.ts";
import { comparePage, errorPage, indexPage, runPage, tunePage } from "./pages.ts";
import { progressAxis } from "../report/progress.ts";
import type { StreamHub } from "./streams.ts";

/** An answer to write: status, content type, body, and headers beside the security ones. */
export interface Reply {
  status: number;
  type: string;
  body: string;
  headers?: Record<string, string>;
}

/** A JSON reply. */
export function json(status: number, value: unknown): Reply {
  return { status, type: "application/json; charset=utf-8", body: JSON.stringify(value, null, 2) };
}

/** An HTML page with status `status` (default 200). */
export function html(body: string, status = 200): Reply {
  return { status, type: "text/html; charset=utf-8", body };
}

/** What the routes read from: the store, and the hub that serves live streams. */
export interface Site {
  store: RunStore;
  streams: StreamHub;
}

/** What a route's handler is handed: the site, the request, its URL and path parameters, and the page's nonce. */
export interface RouteContext extends Site {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  nonce: string;
  /** the path's segments after the route's fixed ones: ids, the events verb */
  params: string[];
  notFound: (message: string) => Reply;
}

/** A route: its fixed segments, how many id segments follow, an optional last segment, and its handler; null: it answered itself. */
interface Route {
  path: string[];
  ids: number;
  tail?: string;
  kind: "run" | "tune";
  answer: (call: RouteContext) => Promise<Reply | null>;
}

/** `?y=log` / `?y=linear` on a run page: the loss chart's scale (anything else: automatic). */
function lossScaleParam(url: URL): { lossScale?: "linear" | "log10" } {
  const y = url.searchParams.get("y");
  return y === "log" ? { lossScale: "log10" } : y === "linear" ? { lossScale: "linear" } : {};
}

async function homePage({ store, nonce }: RouteContext): Promise<Reply> {
  return html(indexPage(await listRuns(store), await listTunes(store), store.root, nonce));
}

async function runPageRoute({ store, url, nonce, params: [id], notFound }: RouteContext): Promise<Reply> {
  const vsId = url.searchParams.get("vs");
  if (vsId !== null && !isRecordId(vsId)) return notFound(`?vs=${vsId}: not a run id`);
  const vs = vsId === null ? null : await loadRun(store, vsId);
  return html(runPage(await runView(store, id as string), store.root, nonce, { axis: progressAxis(url.searchParams.get("x")), vs, ...lossScaleParam(url) }));
}

/** `?run=<id>&run=<id>…` (or `runs=<id>,<id>`): the runs to overlay, each once, oldest first (the first colour). */
function compareIds(url: URL): string[] {
  return [...new Set([...url.searchParams.getAll("run"), ...(url.searchParams.get("runs") ?? "").split(",")].filter((id) => id !== ""))].sort();
}

async function comparePageRoute({ store, url, nonce, notFound }: RouteContext): Promise<Reply> {
  const ids = compareIds(url);
  const bad = ids.find((id) => !isRecordId(id));
  if (bad !== undefined) return notFound(`'${bad}' is not a run id`);
  if (ids.length > 8) return notFound(`${ids.length} runs asked for: the compare page overlays 8 at most`);
  const picked = await Promise.all(ids.map((id) => loadRun(store, id)));
  return html(comparePage(await listRuns(store), picked, store.root, nonce, { axis: progressAxis(url.searchParams.get("x")), ...lossScaleParam(url) }));
}

async function tunePageRoute({ store, nonce, params: [id] }: RouteContext): Promise<Reply> {
  return html(tunePage(await tuneView(store, id as string), store.root, nonce));
}

async function runsApi({ store }: RouteContext): Promise<Reply> {
  return json(200, await listRuns(store));
}

async function runApi({ store, params: [id] }: RouteContext): Promise<Reply> {
  const { meta, timeline } = await loadRun(store, id as string);
  return json(200, { meta, ...(await runStatus(store, meta, Date.now() / 1000)), measures: measureRun(meta, timeline) });
}

async function doctorApi({ store, params: [id] }: RouteContext): Promise<Reply> {
  const { meta, timeline } = await loadRun(store, id as string);
  return json(200, diagnose(meta, timeline));
}

/** A live run's server-sent events, from `Last-Event-ID` or `?from=`; past the stream limits: 503 or 429. */
async function eventsApi({ streams, req, res, url, params: [id] }: RouteContext): Promise<Reply | null> {
  const refused = streams.admit(req);
  if (refused !== null) return { ...json(refused.status, { error: refused.message }), headers: { "Retry-After": "5" } };
  const asked = Number(req.headers["last-event-id"] ?? url.searchParams.get("from") ?? 0);
  await streams.serve(req, res, id as string, Number.isSafeInteger(asked) && asked >= 0 ? asked : 0);
  return null;
}

async function tunesApi({ store }: RouteContext): Promise<Reply> {
  return json(200, await listTunes(store));
}

async function tuneApi({ store, params: [id] }: RouteContext): Promise<Reply> {
  return json(200, await store.readTune(id as string));
}

const ROUTES: readonly Route[] = [
  { path: [], ids: 0, kind: "run", answer: homePage },
  { path: ["runs"], ids: 1, kind: "run", answer: runPageRoute },
  { path: ["compare"], ids: 0, kind: "run", answer: comparePageRoute },
  { path: ["tunes"], ids: 1, kind: "tune", answer: tunePageRoute },
  { path: ["api", "runs"], ids: 0, kind: "run", answer: runsApi },
  { path: ["api", "runs"], ids: 1, kind: "run", answer: runApi },
  { path: ["api", "runs"], ids: 1, tail: "doctor", kind: "run", answer: doctorApi },
  { path: ["api", "runs"], ids: 1, tail: "events", kind: "run", answer: eventsApi },
  { path: ["api", "tunes"], ids: 0, kind: "tune", answer: tunesApi },
  { path: ["api", "tunes"], ids: 1, kind: "tune", answer: tuneApi },
];

/** The path's segments, decoded; one that does not decode becomes "\0", which no route or id matches. */
function pathSegments(path: string): string[] {
  return (path === "/" || path === "" ? [] : path.split("/").slice(1)).map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return "\0";
    }
  });
}

function matches(r: Route, segments: readonly string[]): boolean {
  const length = r.path.length + r.ids + (r.tail === undefined ? 0 : 1);
  if (segments.length !== length || r.path.some((part, i) => segments[i] !== part)) return false;
  return r.tail === undefined || segments[length - 1] === r.tail;
}

/** The 404 of a path: JSON under /api, a page elsewhere. */
function notFoundReply(site: Site, url: URL, nonce: string, message: string): Reply {
  return url.pathname.startsWith("/api/") ? json(404, { error: message }) : html(errorPage(404, message, site.store.root, nonce), 404);
}

/**
 * Answers a request that passed the server's checks: the first route of the table that matches the
 * path, or a 404. Null: the route wrote the response itself (an event stream).
 *
 * @example
 * ```ts
 * const reply = await route({ store, streams }, req, res, new URL(req.url ?? "/", "http://x"), nonce);
 * ```
 */
export async function route(site: Site, req: IncomingMessage, res: ServerResponse, url: URL, nonce: string): Promise<Reply | null> {
  const notFound = (message: string): Reply => notFoundReply(site, url, nonce, message);
  const segments = pathSegments(url.pathname);
  const r = ROUTES.find((candidate) => matches(candidate, segments));
  if (r === undefined) return notFound(`nothing at ${url.pathname}`);
  const params = segments.slice(r.path.length, r.path.length + r.ids);
  const bad = params.find((id) => !isRecordId(id));
  if (bad !== undefined) return notFound(`'${bad}' is not a ${r.kind} id`);
  return r.answer({ store: site.store, streams: site.streams, req, res, url, nonce, params, notFound });
}
