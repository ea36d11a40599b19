/**
 * Reads the devices on a timer. A tick that comes while the previous read is still running is
 * skipped, never queued, so a slow read lowers the rate instead of piling up; the timer is
 * unref'd and does not keep the process alive.
 *
 * @example
 * ```ts
 * const sampler = startSampler(devices, { rootPid: child.pid ?? null, onReading: (r) => store.sample(r) });
 * // ... later
 * await sampler.stop();
 * ```
 * @module
 */
import type { Devices, Reading, Sampler } from "./types.ts";

/**
 * What {@link startSampler} reads and where the readings go.
 *
 * @example
 * ```ts
 * const options: SamplerOptions = { rootPid: 1234, hz: 10, onReading: (r) => console.log(r.t) };
 * ```
 */
export interface SamplerOptions {
  /** The root of the process tree to follow; null for GPUs and host only. */
  rootPid: number | null;
  /** More roots whose trees count with rootPid's (read at each tick). */
  extraRoots?: () => readonly number[];
  /** Readings per second (default 10). */
  hz?: number;
  onReading(reading: Reading): void;
  /** A read or onReading threw; the sampler goes on. */
  onError?(error: unknown): void;
}

/**
 * Starts reading `devices` at `hz` (default 10) right away and then on every tick.
 *
 * @example
 * ```ts
 * const sampler = startSampler(devices, { rootPid: null, onReading: (r) => latest.push(r) });
 * setTimeout(() => void sampler.stop(), 1000);
 * ```
 */
export function startSampler(devices: Devices, options: SamplerOptions): Sampler {
  const hz = options.hz ?? 10;
  if (!(hz > 0) || !Number.isFinite(hz)) throw new RangeError(`sampler hz must be a positive number, got ${hz}`);
  let latest: Reading | null = null;
  let inFlight: Promise<void> | null = null;
  let stopped = false;
  const counts = { readings: 0, skipped: 0, errors: 0 };

  const tick = (): void => {
    if (stopped) return;
    if (inFlight !== null) {
      counts.skipped++;
      return;
    }
    inFlight = devices
      .read(options.rootPid, options.extraRoots?.() ?? [])
      .then((reading) => {
        if (stopped) return;
        latest = reading;
        counts.readings++;
        options.onReading(reading);
      })
      .catch((error: unknown) => {
        counts.errors++;
        options.onError?.(error);
      })
      .finally(() => {
        inFlight = null;
      });
  };

  const timer = setInterval(tick, 1000 / hz);
  timer.unref();
  tick();

  return {
    async stop(): Promise<void> {
      stopped = true;
      clearInterval(timer);
      await inFlight;
    },
    latest: () => latest,
    counts: () => ({ ...counts }),
  };
}
