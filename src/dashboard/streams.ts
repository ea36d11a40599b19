/**
 * The dashboard's live event streams, bounded: at most so many open at once (in all and per client
 * address, refused past that with 503 / 429), one shared feed per run (one tail, one fold, one chart
 * rendering, each event serialised once and written to every client of the run), and no work left
 * behind a client that went (a feed stops once its last client is gone, after a short linger so that
 * a reconnect reuses it).
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { open } from "node:fs/promises";
import { join } from "node:path";
import type { RunStore } from "../record/store.ts";
import { loadTimelineSpread, TimelineFold } from "../record/timeline/index.ts";
import type { RunMeta } from "../record/types.ts";
import { renderChart } from "../report/svg.ts";
import { liveCharts, PAGE_READ_BYTES } from "./data.ts";
import { readTimelineFrom, TimelineTail } from "./tail.ts";

/**
 * Limits and pace of the live streams.
 *
 * @example
 * ```ts
 * const limits: StreamOptions = { maxStreams: 64, maxStreamsPerClient: 16, pollMs: 500, chartEveryMs: 1000, heartbeatMs: 15000 };
 * ```
 */
export interface StreamOptions {
  /** streams open at once, all clients together; past it new ones get 503 */
  maxStreams: number;
  /** streams open at once from one client address; past it new ones get 429 */
  maxStreamsPerClient: number;
  pollMs: number;
  chartEveryMs: number;
  heartbeatMs: number;
  /** how long a run's feed stays after its last client left, for reconnects (ms) */
  lingerMs?: number;
  onError?: (error: unknown) => void;
}

/** Entries a new client is sent from before it joined, at most (older ones are skipped: the charts show the whole run). */
export const CATCHUP_BYTES = 2 ** 20;
/** A client whose socket holds more than this unsent is too slow to follow: its stream is closed. */
export const MAX_UNSENT_BYTES = 4 * 2 ** 20;

const SECURITY = {
  "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-store",
};

function event(name: string, data: unknown, id?: number): string {
  return `${id !== undefined ? `id: ${id}\n` : ""}event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

interface Client {
  res: ServerResponse;
  address: string;
  closed: boolean;
  feed: Feed | null;
}

interface Feed {
  id: string;
  path: string;
  meta: RunMeta;
  fold: TimelineFold;
  tail: TimelineTail;
  clients: Set<Client>;
  /** the last charts event, serialised */
  charts: string | null;
  dirty: boolean;
  lastCharts: number;
  ended: string | null;
  /** one poll or catch-up at a time */
  lock: Promise<void>;
  timer: NodeJS.Timeout | null;
  linger: NodeJS.Timeout | null;
  /** what {@link StreamHub} holds for this run while the feed serves */
  entry: Promise<Feed> | null;
  /** the last catch-up sent, serialised: clients that join from the same offset share it */
  catchUp: { start: number; to: number; text: string } | null;
}

/**
 * Why a stream was refused, for the HTTP answer.
 *
 * @example
 * ```ts
 * const r: StreamRefusal = { status: 503, message: "too many live streams" };
 * ```
 */
export interface StreamRefusal {
  status: 429 | 503;
  message: string;
}

/**
 * The live streams of one dashboard.
 *
 * @example
 * ```ts
 * const hub = new StreamHub(store, { maxStreams: 64, maxStreamsPerClient: 16, pollMs: 500, chartEveryMs: 1000, heartbeatMs: 15000 });
 * const refused = hub.admit(req); // null, or a 503/429 to answer
 * ```
 */
export class StreamHub {
  readonly #store: RunStore;
  readonly #options: StreamOptions;
  readonly #clients = new Set<Client>();
  readonly #perAddress = new Map<string, number>();
  readonly #feeds = new Map<string, Promise<Feed>>();
  readonly #heartbeat: NodeJS.Timeout;

  constructor(store: RunStore, options: StreamOptions) {
    this.#store = store;
    this.#options = options;
    this.#heartbeat = setInterval(() => {
      for (const c of this.#clients) this.#write(c, ": ping\n\n");
    }, options.heartbeatMs);
    this.#heartbeat.unref();
  }

  /** Streams open now. */
  get open(): number {
    return this.#clients.size;
  }

  /** Runs being followed now (each one tail, whatever the number of its clients). */
  get feeds(): number {
    return this.#feeds.size;
  }

  /** Null when a new stream from this request's address fits the limits, else why not. */
  admit(req: IncomingMessage): StreamRefusal | null {
    const address = req.socket.remoteAddress ?? "?";
    if (this.#clients.size >= this.#options.maxStreams)
      return {
        status: 503,
        message: `too many live streams open (${this.#options.maxStreams}): close some dashboard tabs, or try again shortly`,
      };
    if ((this.#perAddress.get(address) ?? 0) >= this.#options.maxStreamsPerClient)
      return {
        status: 429,
        message: `too many live streams from ${address} (${this.#options.maxStreamsPerClient}): close some dashboard tabs`,
      };
    return null;
  }

  /**
   * Serves one stream of run `id` from byte `from` of its timeline; resolves once the client is
   * attached (or gone). Call {@link StreamHub.admit} first. Throws what reading the run throws
   * (E_NOT_FOUND for a run that is not there) before anything is written.
   */
  async serve(req: IncomingMessage, res: ServerResponse, id: string, from: number): Promise<void> {
    const address = req.socket.remoteAddress ?? "?";
    const client: Client = { res, address, closed: false, feed: null };
    // Counted before the first await, so that a burst cannot slip past the limits.
    this.#clients.add(client);
    this.#perAddress.set(address, (this.#perAddress.get(address) ?? 0) + 1);
    const leave = (): void => this.#drop(client);
    res.once("close", leave);
    req.once("close", leave);
    res.on("error", leave);
    let feed: Feed;
    try {
      feed = await this.#feed(id);
    } catch (error) {
      this.#drop(client);
      throw error;
    }
    if (client.closed || res.destroyed) {
      this.#drop(client);
      return;
    }
    res.writeHead(200, { ...SECURITY, "Content-Type": "text/event-stream; charset=utf-8", Connection: "keep-alive", "X-Accel-Buffering": "no" });
    res.write("retry: 2000\n\n");
    const joined = feed;
    await this.#locked(joined, async () => {
      if (client.closed) return;
      await this.#catchUp(client, joined, from);
      if (client.closed) return;
      if (joined.charts !== null) this.#write(client, joined.charts);
      if (joined.ended !== null) {
        this.#write(client, joined.ended);
        this.#close(client);
        return;
      }
      joined.clients.add(client);
      client.feed = joined;
      if (joined.linger !== null) clearTimeout(joined.linger);
      joined.linger = null;
      joined.timer ??= setInterval(() => void this.#locked(joined, () => this.#tick(joined)), this.#options.pollMs);
    });
    // Not joined (the catch-up failed, or the run had ended): the stream ends rather than idle.
    if (client.closed || client.feed === null) this.#close(client);
  }

  /** Ends every stream and feed. */
  close(): void {
    clearInterval(this.#heartbeat);
    for (const c of [...this.#clients]) this.#close(c);
    for (const p of this.#feeds.values())
      void p.then(
        (f) => this.#stop(f),
        () => {},
      );
    this.#feeds.clear();
  }

  #write(client: Client, text: string): void {
    if (client.closed) return;
    if (client.res.destroyed || client.res.writableLength > MAX_UNSENT_BYTES) {
      this.#close(client);
      return;
    }
    client.res.write(text);
  }

  #close(client: Client): void {
    if (!client.closed && !client.res.destroyed) client.res.end();
    this.#drop(client);
  }

  #drop(client: Client): void {
    client.closed = true;
    if (this.#clients.delete(client)) {
      const n = (this.#perAddress.get(client.address) ?? 1) - 1;
      if (n <= 0) this.#perAddress.delete(client.address);
      else this.#perAddress.set(client.address, n);
    }
    if (!client.res.destroyed && !client.res.writableEnded && client.res.headersSent) client.res.end();
    const feed = client.feed;
    client.feed = null;
    if (feed !== null) {
      feed.clients.delete(client);
      this.#maybeRetire(feed);
    }
  }

  #maybeRetire(feed: Feed): void {
    if (feed.clients.size > 0 || feed.linger !== null) return;
    if (feed.timer !== null) clearInterval(feed.timer);
    feed.timer = null;
    // Lingering feeds are not streams: past as many feeds as streams, one goes at once.
    if (this.#feeds.size > this.#options.maxStreams) {
      this.#stop(feed);
      return;
    }
    feed.linger = setTimeout(() => {
      feed.linger = null;
      if (feed.clients.size === 0) this.#stop(feed);
    }, this.#options.lingerMs ?? 3000);
    feed.linger.unref();
  }

  #stop(feed: Feed): void {
    if (feed.timer !== null) clearInterval(feed.timer);
    if (feed.linger !== null) clearTimeout(feed.linger);
    feed.timer = null;
    feed.linger = null;
    for (const c of [...feed.clients]) this.#close(c);
    if (feed.entry !== null && this.#feeds.get(feed.id) === feed.entry) this.#feeds.delete(feed.id);
  }

  #feed(id: string): Promise<Feed> {
    let p = this.#feeds.get(id);
    if (p === undefined) {
      const opening = this.#openFeed(id);
      p = opening;
      this.#feeds.set(id, opening);
      opening.then(
        (f) => {
          f.entry = opening;
          // Nobody joined while it was read (every client left): it lingers, then goes.
          if (f.clients.size === 0) this.#maybeRetire(f);
        },
        () => this.#feeds.delete(id),
      );
    }
    return p;
  }

  async #openFeed(id: string): Promise<Feed> {
    const meta = await this.#store.readRunMeta(id);
    const path = join(this.#store.runDir(id), "timeline.ndjson");
    const fold = new TimelineFold();
    const { offset } = await loadTimelineSpread(path, { budgetBytes: PAGE_READ_BYTES, fold });
    const feed: Feed = {
      id,
      path,
      meta,
      fold,
      tail: new TimelineTail(path, offset),
      clients: new Set(),
      charts: null,
      dirty: true,
      lastCharts: 0,
      ended: null,
      lock: Promise.resolve(),
      timer: null,
      linger: null,
      entry: null,
      catchUp: null,
    };
    this.#renderCharts(feed);
    // An ended run's timeline grows no more (its end line may be missing when the store failed). The
    // end line can also land between the read of run.json and the read of the timeline: the tail is
    // then past it, no tick would see it, and the page would stay live.
    const end = fold.timeline().end;
    if (meta.end !== null || end !== null) await this.#end(feed, end?.cause ?? null);
    return feed;
  }

  /** Marks the feed ended once its timeline has its end line: run.json, rewritten just after, gives the end's message. */
  async #end(feed: Feed, timelineCause: string | null): Promise<string> {
    // The writer appends the timeline's end line before it rewrites run.json with the end: give it a moment.
    for (let tries = 0; tries < 20 && feed.meta.end === null; tries++) {
      if (tries > 0) await new Promise((resolve) => setTimeout(resolve, 100));
      try {
        feed.meta = await this.#store.readRunMeta(feed.id);
      } catch {
        // run.json is rewritten atomically; a failed read here only loses the end's message
      }
    }
    const cause = feed.meta.end?.cause ?? timelineCause ?? "unknown";
    feed.ended = event("end", { cause, message: feed.meta.end?.message ?? null });
    return feed.ended;
  }

  #renderCharts(feed: Feed): void {
    const live = liveCharts(feed.meta, feed.fold.timeline());
    feed.charts = event("charts", { charts: Object.fromEntries(live.charts.map((c) => [c.id, renderChart(c)])), numbers: live.numbers, tiles: live.tiles });
    feed.dirty = false;
    feed.lastCharts = Date.now();
  }

  #locked(feed: Feed, work: () => Promise<void>): Promise<void> {
    const next = feed.lock.then(work).catch((error: unknown) => this.#options.onError?.(error));
    feed.lock = next;
    return next;
  }

  /** The entries between `from` and where the feed is, at most {@link CATCHUP_BYTES} of the newest. */
  async #catchUp(client: Client, feed: Feed, from: number): Promise<void> {
    const to = feed.tail.offset;
    if (from >= to) return;
    let start = from;
    if (to - from > CATCHUP_BYTES) start = await nextLineStart(feed.path, to - CATCHUP_BYTES);
    if (feed.catchUp === null || feed.catchUp.start !== start || feed.catchUp.to !== to) {
      const { entries, offset } = await readTimelineFrom(feed.path, start, to);
      feed.catchUp = { start, to, text: entries.length > 0 ? event("entries", entries, offset) : "" };
    }
    if (feed.catchUp.text !== "") this.#write(client, feed.catchUp.text);
  }

  async #tick(feed: Feed): Promise<void> {
    if (feed.clients.size === 0 || feed.ended !== null) return;
    const fresh = await feed.tail.poll();
    if (fresh.length > 0) {
      for (const entry of fresh) feed.fold.add(entry);
      const text = event("entries", fresh, feed.tail.offset);
      for (const c of [...feed.clients]) this.#write(c, text);
      feed.dirty = true;
    }
    const end = fresh.find((e) => e.kind === "end");
    if (feed.dirty && (end !== undefined || Date.now() - feed.lastCharts >= this.#options.chartEveryMs)) {
      this.#renderCharts(feed);
      for (const c of [...feed.clients]) this.#write(c, feed.charts as string);
    }
    if (end === undefined) return;
    const ended = await this.#end(feed, typeof end.cause === "string" ? end.cause : null);
    for (const c of [...feed.clients]) {
      this.#write(c, ended);
      this.#close(c);
    }
  }
}

/** The byte offset of the first line that starts at or after `at`. */
async function nextLineStart(path: string, at: number): Promise<number> {
  const handle = await open(path, "r");
  try {
    const buffer = Buffer.alloc(64 * 1024);
    for (let pos = Math.max(0, at - 1); ; pos += buffer.length) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, pos);
      if (bytesRead === 0) return pos;
      const nl = buffer.subarray(0, bytesRead).indexOf(0x0a);
      if (nl >= 0) return pos + nl + 1;
    }
  } finally {
    await handle.close();
  }
}
