import { describe, expect, it } from "vitest";
import { median, StreamingMedian } from "../src/stats.ts";

describe("median", () => {
  it("is the middle value, or the mean of the middle two, of numbers in any order", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(median(new Float64Array([10, -1]))).toBe(4.5);
    expect(median([])).toBeNull();
  });

  it("a stream's median is the list's while it is kept exactly", () => {
    const values = Array.from({ length: 1001 }, (_, i) => ((i * 7919) % 1001) / 100);
    const stream = new StreamingMedian();
    for (const v of values) stream.add(v);
    expect(stream.median()).toBe(median(values));
    expect(new StreamingMedian().median()).toBeNull();
  });
});
