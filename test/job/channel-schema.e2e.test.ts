// Every message the attach and the SDK send is one the channel schema (docs/schemas/channel.v1.json)
// allows: real jobs, torch and JAX alike, under the real guard, each message checked against the
// schema itself (read into zod with z.fromJSONSchema), so the schema cannot drift from what is sent.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { openDevices } from "../../src/devices/index.ts";
import { guardRun } from "../../src/guard/guard.ts";
import type { ChannelMessage } from "../../src/job/channel.ts";
import { RunStore } from "../../src/record/store.ts";
import { hasModules } from "../helpers/python.ts";
import { scaled } from "../helpers/time.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const PYTHON = process.env.BRIM_TEST_PYTHON ?? "/usr/bin/python3";
const root = mkdtempSync(join(tmpdir(), "brim-channel-schema-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const schema = z.fromJSONSchema(JSON.parse(readFileSync(join(REPO, "docs", "schemas", "channel.v1.json"), "utf8")) as Parameters<typeof z.fromJSONSchema>[0]);
const hasJax = hasModules(PYTHON, "jax");

async function messagesOf(command: string[]): Promise<ChannelMessage[]> {
  const messages: ChannelMessage[] = [];
  const devices = openDevices({ nvmlLibrary: "/nonexistent/libnvidia-ml.so.1", smiPath: null });
  const store = new RunStore(join(root, "store"));
  const result = await guardRun(
    { command, cwd: REPO, capBytes: null, stepBudget: 6, warmupSteps: 1, hz: 10, onMessage: (m) => messages.push(m) },
    { devices, store },
  );
  expect(result.meta.end?.cause, result.job.tail.join("\n")).toBe("ok");
  return messages;
}

function invalid(messages: ChannelMessage[]): string[] {
  return messages.flatMap((m) => {
    const r = schema.safeParse(m);
    return r.success ? [] : [`${JSON.stringify(m).slice(0, 300)}: ${r.error.message.slice(0, 300)}`];
  });
}

describe("what the job sends is what the channel schema allows", () => {
  it("a torch loop, unmodified, under the attach: hello, steps, events", { timeout: scaled(180_000) }, async () => {
    const messages = await messagesOf([PYTHON, join(REPO, "test", "jobs", "plain_loop.py")]);
    expect(messages.some((m) => m.type === "step" && (m as { trigger?: string }).trigger === "optimizer")).toBe(true);
    expect(invalid(messages)).toEqual([]);
  });

  it.skipIf(!hasJax)(
    "a JAX loop, unmodified, under the JAX attach: its steps say trigger jax, and the compiling ones compiled",
    { timeout: scaled(240_000) },
    async () => {
      const messages = await messagesOf([PYTHON, join(REPO, "test", "jobs", "jax_epochs.py"), "--epochs", "3"]);
      const steps = messages.filter((m) => m.type === "step") as { trigger?: string; compiled?: boolean }[];
      expect(steps.length).toBeGreaterThan(0);
      expect(steps.every((s) => s.trigger === "jax")).toBe(true);
      expect(steps.some((s) => s.compiled === true)).toBe(true);
      expect(invalid(messages)).toEqual([]);
    },
  );

  it("the schema is not a pass-through: a step with an unknown trigger is refused", () => {
    const step = {
      v: 1,
      type: "step",
      t: 1,
      pid: 1,
      step: 0,
      samples: 8,
      wait_s: 0,
      compute_s: 0.1,
      warmup: false,
      micro_batch: 8,
      accumulation: 1,
      loss: null,
      mem: { device: "cpu" },
    };
    expect(schema.safeParse(step).success).toBe(true);
    expect(schema.safeParse({ ...step, trigger: "tensorflow" }).success).toBe(false);
    expect(schema.safeParse({ ...step, trigger: "jax" }).success).toBe(true);
  });
});
