import { describe, expect, it } from "vitest";
import { serveMetrics } from "../../src/metrics/prometheus.ts";

describe("--prometheus-token on a host reachable from other machines", () => {
  it("refuses a token under 16 characters and says why", async () => {
    await expect(serveMetrics(9400, () => "", "0.0.0.0", "short-token")).rejects.toThrow(
      /^--prometheus-token is 11 characters long: a token for 0\.0\.0\.0:9400, reachable from other machines, needs 16 or more/,
    );
    await expect(serveMetrics(9400, () => "", "0.0.0.0", null)).rejects.toThrow(/give --prometheus-token <token> \(16 characters or more/);
  });
});
