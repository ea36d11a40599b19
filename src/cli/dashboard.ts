import type { Command } from "commander";
import { UsageError } from "../errors/index.ts";
import { DEFAULT_PORT, startDashboard, type Dashboard } from "../dashboard/server.ts";
import { RunStore, storeRoot } from "../record/store.ts";
import type { Output } from "./output.ts";

/**
 * Options of `brim dashboard` as the command line gives them.
 *
 * @example
 * ```ts
 * const options: DashboardCommandOptions = { port: 0, host: "127.0.0.1" };
 * ```
 */
export interface DashboardCommandOptions {
  store?: string;
  host?: string;
  port?: number;
}

/**
 * `brim dashboard`: starts the local web page over the run store and returns it running.
 *
 * @example
 * ```ts
 * const dash = await dashboardCommand({ port: 0 });
 * console.log(dash.url);
 * await dash.close();
 * ```
 */
export async function dashboardCommand(
  options: DashboardCommandOptions,
  env: NodeJS.ProcessEnv = process.env,
  cwd = process.cwd(),
  out?: Output,
): Promise<Dashboard> {
  const store = new RunStore(storeRoot(options.store, env, cwd));
  return startDashboard({
    store,
    host: options.host ?? "127.0.0.1",
    port: options.port ?? DEFAULT_PORT,
    onError: (error) => out?.stderr(`brim dashboard: ${(error as Error).stack ?? String(error)}\n`),
  });
}

/**
 * Serves until `stop` aborts (SIGINT / SIGTERM from the command line), then closes cleanly.
 *
 * @example
 * ```ts
 * const controller = new AbortController();
 * process.once("SIGINT", () => controller.abort());
 * await serveDashboard({ port: 0 }, processOutput, controller.signal);
 * ```
 */
export async function serveDashboard(options: DashboardCommandOptions, out: Output, stop: AbortSignal): Promise<void> {
  const dash = await dashboardCommand(options, process.env, process.cwd(), out);
  out.stdout(`brim dashboard: ${dash.url}\n`);
  out.stdout(`  store ${storeRoot(options.store, process.env, process.cwd())} · read-only · Ctrl-C stops\n`);
  if (dash.token !== null)
    out.stdout(
      `  every request needs the token in the URL above (keep it private)${dash.tokenFile !== null ? `; it is kept in ${dash.tokenFile} (readable by you only)` : ""}\n`,
    );
  await new Promise<void>((resolve) => {
    if (stop.aborted) resolve();
    else stop.addEventListener("abort", () => resolve(), { once: true });
  });
  await dash.close();
  out.stdout("brim dashboard: stopped\n");
}

function port(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n > 65535)
    throw new UsageError(`--port must be a port number from 0 to 65535 (0 = any free port), got ${JSON.stringify(value)}`);
  return n;
}

const EXAMPLES = `
Examples:
  $ brim dashboard                      # http://127.0.0.1:7878/?token=…
  $ brim dashboard --port 0             # any free port (printed)
  $ brim dashboard --host 0.0.0.0       # reachable from other machines (same token)

Every request needs the store's token, on loopback too (every local user can reach loopback): the
printed URL carries it, and the page sets it as a cookie. It is made once and kept in
<store>/dashboard.token, readable by you only.

Live runs update as their timeline grows (server-sent events); past runs show their charts and
findings; tunes show their curves. Read-only: the dashboard never changes the store.
`;

/**
 * Declares `brim dashboard` on a commander program.
 *
 * @example
 * ```ts
 * registerDashboard(program, output);
 * ```
 */
export function registerDashboard(program: Command, out: Output): void {
  program
    .command("dashboard")
    .summary("a local web page of live and past runs and tunes")
    .description("Serve a read-only web page over the run store: live runs, history, tune curves, findings.")
    .option("--port <n>", `port to listen on (0 = any free port)`, port, DEFAULT_PORT)
    .option("--host <address>", "address to listen on (every request needs the token in the printed URL)", "127.0.0.1")
    .option("--store <dir>", "run store (default: $BRIM_STORE or ./.brim)")
    .addHelpText("after", EXAMPLES)
    .action(async (options: DashboardCommandOptions) => {
      const controller = new AbortController();
      const stop = (): void => controller.abort();
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      try {
        await serveDashboard(options, out, controller.signal);
      } finally {
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
      }
    });
}
