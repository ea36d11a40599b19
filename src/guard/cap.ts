/** What the guard does about memory after one reading. */
export type CapAction = { kind: "none" } | { kind: "shrink"; usedBytes: number } | { kind: "stop"; usedBytes: number; detail: string };

/** The cap policy: when to ask the SDK to shrink, when to stop the job. */
export interface CapPolicy {
  capBytes: number;
  /** Share of the cap at which the SDK is asked to shrink (default 0.92). */
  shrinkAt?: number;
  /** Seconds between two shrink requests (default 5). */
  shrinkEveryS?: number;
  /** Readings in a row over the cap before stopping (default 2: one reading can catch a transient). */
  overReadings?: number;
  /** What the cap applies to, for the messages. */
  scope: "gpu" | "ram";
}

const formatGiB = (bytes: number): string => `${(bytes / 2 ** 30).toFixed(2)} GiB`;

/**
 * Decides, reading by reading, how to keep a job's process tree under its memory cap: ask the SDK to
 * shrink near the cap (it splits the micro-batch and keeps the maths), and stop the job as the last
 * resort when the tree stays over it.
 *
 * @example
 * ```ts
 * const watcher = new CapWatcher({ capBytes: 12 * 2 ** 30, scope: "gpu" });
 * watcher.observe(11.5 * 2 ** 30, 10.0, true); // { kind: "shrink", usedBytes: ... }
 * ```
 */
export class CapWatcher {
  readonly policy: Required<CapPolicy>;
  #lastShrinkAt = Number.NEGATIVE_INFINITY;
  #overInARow = 0;
  #shrinkRequests = 0;

  constructor(policy: CapPolicy) {
    this.policy = { shrinkAt: 0.92, shrinkEveryS: 5, overReadings: 2, ...policy };
  }

  /** Shrink requests made so far. */
  get shrinkRequests(): number {
    return this.#shrinkRequests;
  }

  /**
   * One reading: `usedBytes` held by the tree at time `t` (seconds); `canShrink` when an SDK client is
   * connected to ask.
   */
  observe(usedBytes: number, t: number, canShrink: boolean): CapAction {
    const { capBytes, shrinkAt, shrinkEveryS, overReadings, scope } = this.policy;
    if (usedBytes > capBytes) {
      this.#overInARow++;
      if (this.#overInARow >= overReadings) {
        const what = scope === "gpu" ? "GPU memory" : "RAM (PSS)";
        return { kind: "stop", usedBytes, detail: `the job's processes held ${formatGiB(usedBytes)} of ${what}, over the ${formatGiB(capBytes)} cap` };
      }
    } else {
      this.#overInARow = 0;
    }
    if (canShrink && usedBytes >= capBytes * shrinkAt && t - this.#lastShrinkAt >= shrinkEveryS) {
      this.#lastShrinkAt = t;
      this.#shrinkRequests++;
      return { kind: "shrink", usedBytes };
    }
    return { kind: "none" };
  }
}
