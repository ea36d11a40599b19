import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { runSchema, runSummarySchema, trialSchema, tuneSchema } from "../../src/record/schema.ts";

const doc = readFileSync(new URL("../../docs/run-store.md", import.meta.url), "utf8");

/** The part of the doc from a heading to the next heading of the same level or higher. */
function section(heading: string): string {
  const start = doc.indexOf(`\n${heading}\n`);
  expect(start, heading).toBeGreaterThanOrEqual(0);
  const level = heading.split(" ")[0] as string;
  const rest = doc.slice(start + heading.length + 2);
  const next = rest.search(new RegExp(`\\n#{1,${level.length}} `));
  return next < 0 ? rest : rest.slice(0, next);
}

describe("docs/run-store.md names every field of the schema, and no other", () => {
  it("run.json: every field in its example", () => {
    const text = section("## run.json");
    for (const key of Object.keys(runSchema.shape)) expect(text, key).toContain(`"${key}"`);
  });

  it("summary: one table row per field, and a row only for a field", () => {
    const rows = [...section("### summary").matchAll(/^\| (`[^|]+`) \|/gm)].flatMap((m) => [...(m[1] as string).matchAll(/`([a-z_0-9]+)`/g)].map((k) => k[1]));
    expect(new Set(rows)).toEqual(new Set(Object.keys(runSummarySchema.shape)));
  });

  it("tune.json: every field, and every trial field, in its example", () => {
    const text = section("## tune.json");
    for (const key of Object.keys(tuneSchema.shape)) expect(text, key).toContain(`"${key}"`);
    for (const key of Object.keys(trialSchema.shape)) expect(text, `trials[].${key}`).toContain(`"${key}"`);
  });
});
