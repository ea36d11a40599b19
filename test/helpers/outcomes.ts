// What a hostile-input test tried and how much of it got through, for bench/shared-box.bench.mjs:
// appended as one JSON line to $BRIM_SHARED_OUT when it is set (nothing otherwise).
import { appendFileSync } from "node:fs";

/**
 * Notes one probe: `tried` inputs, `failed` of them not handled as they must be.
 *
 * @example
 * ```ts
 * noteOutcome("stream storm", 1500, 0, "npx vitest run test/dashboard/storm.e2e.test.ts");
 * ```
 */
export function noteOutcome(probe: string, tried: number, failed: number, test: string, detail: Record<string, unknown> = {}): void {
  const out = process.env.BRIM_SHARED_OUT;
  if (out === undefined || out === "") return;
  appendFileSync(out, `${JSON.stringify({ probe, tried, failed, test, ...detail })}\n`);
}
