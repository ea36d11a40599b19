import { describe, expect, it } from "vitest";
import { scaled, timeScale } from "./time.ts";

describe("the tests' time limits scale with the machine", () => {
  it("take BRIM_TEST_TIME_SCALE when set, and refuse one under 1 or not a number, in one line", () => {
    expect(timeScale({ BRIM_TEST_TIME_SCALE: "3" }, 0, 2)).toBe(3);
    expect(timeScale({ BRIM_TEST_TIME_SCALE: "" }, 0, 2)).toBe(1);
    expect(() => timeScale({ BRIM_TEST_TIME_SCALE: "0.5" }, 0, 2)).toThrow(/^BRIM_TEST_TIME_SCALE must be a number ≥ 1, got "0\.5"$/);
    expect(() => timeScale({ BRIM_TEST_TIME_SCALE: "fast" }, 0, 2)).toThrow(/got "fast"/);
  });

  it("otherwise grow with the load per core: idle 1, two busy cores of two 2, at most 4", () => {
    expect(timeScale({}, 0, 2)).toBe(1);
    expect(timeScale({}, 2, 2)).toBe(2);
    expect(timeScale({}, 3, 2)).toBe(2.5);
    expect(timeScale({}, 40, 2)).toBe(4);
    expect(timeScale({}, 8, 16)).toBe(1.5);
  });

  it("never shorten a limit", () => {
    expect(scaled(60_000)).toBeGreaterThanOrEqual(60_000);
  });
});
