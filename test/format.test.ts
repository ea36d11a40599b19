import { describe, expect, it } from "vitest";
import { table, wrap } from "../src/format.ts";

describe("table", () => {
  it("pads each column to its widest cell, left or right, with no trailing spaces", () => {
    const rows = [
      ["GPU", "memory", "note"],
      ["0", "80 GiB", ""],
      ["10", "8 GiB", "busy"],
    ];
    expect(table(rows)).toEqual(["GPU  memory  note", "0    80 GiB", "10   8 GiB   busy"]);
    expect(table(rows, ["r", "r", "l"])).toEqual(["GPU  memory  note", "  0  80 GiB", " 10   8 GiB  busy"]);
    expect(table([])).toEqual([]);
  });
});

describe("wrap", () => {
  it("breaks between words within the width, the indent on every line and the hang after the first", () => {
    expect(wrap("one two three four", 9)).toEqual(["one two", "three", "four"]);
    expect(wrap("one two three", 9, "", "  ")).toEqual(["one two", "  three"]);
    expect(wrap("one  two\nthree", 12, "   ")).toEqual(["   one two", "   three"]);
    expect(wrap("a-very-long-word b", 5)).toEqual(["a-very-long-word", "b"]);
    expect(wrap("  ", 10, "  ")).toEqual([]);
  });
});
