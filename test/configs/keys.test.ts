import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InputError } from "../../src/errors/index.ts";
import { formatKeyPath, parseKeyPath } from "../../src/configs/index.ts";
import { getAt, sameValue, setAt } from "../../src/configs/keys.ts";

describe("key paths", () => {
  it("splits on dots, reads numeric segments as indexes, and keeps quoted dots", () => {
    expect(parseKeyPath("data_loader.batch_size")).toEqual([
      { name: "data_loader", index: undefined },
      { name: "batch_size", index: undefined },
    ]);
    expect(parseKeyPath("stages.1.batch_size")[1]).toEqual({ name: "1", index: 1 });
    expect(parseKeyPath('"a.b".c').map((s) => s.name)).toEqual(["a.b", "c"]);
    expect(parseKeyPath('x."say \\"hi\\"".y').map((s) => s.name)).toEqual(["x", 'say "hi"', "y"]);
    expect(parseKeyPath('"1"')).toEqual([{ name: "1", index: undefined }]);
    expect(parseKeyPath("01")).toEqual([{ name: "01", index: undefined }]);
  });

  it.each(["", ".", "a.", ".a", "a..b", '"a', '"a"b', 'a"b', '"\\x"'])("refuses %j", (key) => {
    expect(() => parseKeyPath(key)).toThrow(InputError);
  });

  it("formats segments back to a key that parses the same", () => {
    const segment = fc
      .oneof(fc.string({ minLength: 1 }), fc.nat().map(String))
      .map((name) => ({ name, index: /^(0|[1-9]\d*)$/.test(name) && Number.isSafeInteger(Number(name)) ? Number(name) : undefined }));
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 4 }), (segments) => {
        expect(parseKeyPath(formatKeyPath(segments))).toEqual(segments);
      }),
    );
    expect(formatKeyPath(parseKeyPath('"a.b".c'))).toBe('"a.b".c');
  });

  it("gets and sets plain data by path", () => {
    const data = { a: [{ b: 1 }], c: null };
    expect(getAt(data, parseKeyPath("a.0.b"))).toBe(1);
    expect(getAt(data, parseKeyPath("a.x"))).toBeUndefined();
    expect(getAt(data, parseKeyPath("c.d"))).toBeUndefined();
    setAt(data, parseKeyPath("a.0.e.f"), 2);
    expect(data).toEqual({ a: [{ b: 1, e: { f: 2 } }], c: null });
    const proto: Record<string, unknown> = {};
    setAt(proto, parseKeyPath("__proto__.x"), 1);
    expect(Object.keys(proto)).toEqual(["__proto__"]);
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it("compares data deeply, dates by time", () => {
    expect(sameValue({ a: [1, new Date(5)] }, { a: [1, new Date(5)] })).toBe(true);
    expect(sameValue({ a: 1 }, { a: 1, b: undefined })).toBe(false);
    expect(sameValue([1], { 0: 1 })).toBe(false);
    expect(sameValue(null, undefined)).toBe(false);
  });
});
