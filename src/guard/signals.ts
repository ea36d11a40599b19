/**
 * The signals brim receives while it guards a job: SIGINT and SIGTERM are passed to the job, a lost
 * terminal (SIGHUP) stops it — or is ignored when the user asked the job to outlive its guard.
 *
 * @module
 */
import type { TimelineEntry } from "../record/types.ts";

/** What brim does about one signal: the event it records and the signal it sends the job (null: none). */
export interface SignalDecision {
  entry: TimelineEntry;
  send: NodeJS.Signals | null;
}

/**
 * The decision for a signal brim received at time `t`.
 *
 * @example
 * ```ts
 * signalDecision("SIGHUP", false, 3).send; // "SIGTERM"
 * ```
 */
export function signalDecision(signal: NodeJS.Signals, keepOnSupervisorLoss: boolean, t: number): SignalDecision {
  const event = (event: string, message: string, details: Record<string, unknown>): TimelineEntry => ({
    t,
    kind: "event",
    event,
    pid: null,
    step: null,
    message,
    details,
  });
  if (signal !== "SIGHUP") return { entry: event("signal_forwarded", `brim received ${signal} and passed it to the job`, { signal }), send: signal };
  if (keepOnSupervisorLoss) {
    return { entry: event("sighup_ignored", "brim lost its terminal (SIGHUP) and goes on guarding the job (--keep-on-supervisor-loss)", {}), send: null };
  }
  return {
    entry: event("signal_forwarded", "brim lost its terminal (SIGHUP): it stops the job rather than leave it unguarded", { signal: "SIGHUP" }),
    send: "SIGTERM",
  };
}

/** The handlers of one guarded run, registered before its job starts. */
export interface SignalForwarding {
  /** The job is running: signals go to it from now on, and one that came while it started is handled now. */
  attach(job: { interrupt(signal: NodeJS.Signals): void }): void;
  /** Unregisters the handlers. */
  remove(): void;
}

/**
 * Registers brim's handlers for SIGINT, SIGTERM and SIGHUP (only when `enabled`); a signal that arrives
 * while the job starts waits for it. `wrap` guards each handler (a failure in it fails the guard).
 *
 * @example
 * ```ts
 * const signals = forwardSignals({ enabled: true, keepOnSupervisorLoss: false }, (entry) => writer.append(entry), (fn) => fn);
 * signals.attach(job);
 * signals.remove();
 * ```
 */
export function forwardSignals(
  options: { enabled: boolean; keepOnSupervisorLoss: boolean },
  record: (entry: TimelineEntry) => void,
  wrap: (fn: (signal: NodeJS.Signals) => void) => (signal: NodeJS.Signals) => void,
): SignalForwarding {
  let job: { interrupt(signal: NodeJS.Signals): void } | null = null;
  let early: NodeJS.Signals | null = null;
  const handle = (signal: NodeJS.Signals): void => {
    if (job === null) {
      early = signal;
      return;
    }
    const decision = signalDecision(signal, options.keepOnSupervisorLoss, Date.now() / 1000);
    record(decision.entry);
    if (decision.send !== null) job.interrupt(decision.send);
  };
  const onSignal = wrap(handle);
  if (options.enabled) for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, onSignal);
  return {
    attach(started) {
      job = started;
      if (early !== null) onSignal(early);
    },
    remove() {
      if (options.enabled) for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.off(signal, onSignal);
    },
  };
}
