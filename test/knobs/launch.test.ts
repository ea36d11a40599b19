// One launch (src/knobs/launch.ts): a command made to run with knob values through every channel at
// once — a config copy beside the original, a {name} template, a flag, a value written in the code —
// and its copies gone after cleanup, or when writing one fails.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { brimCopiesOf, copyPathOf } from "../../src/configs/index.ts";
import { resolveBindings } from "../../src/knobs/resolve.ts";
import type { KnobBinding } from "../../src/knobs/binding.ts";
import { TRIAL_SEED, launchWithKnobs } from "../../src/knobs/launch.ts";

const root = mkdtempSync(join(tmpdir(), "brim-launch-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const OWNER = "20261129-083000-ab12";

describe("launchWithKnobs", () => {
  it("writes a config copy, fills templates, rewrites flags and sets the code knobs' environment; cleanup removes the copy", async () => {
    const dir = join(root, "all");
    mkdirSync(dir);
    writeFileSync(join(dir, "conf.yaml"), "data:\n  batch_size: 32  # the micro-batch\n  num_workers: 0\n");
    const command = ["python", "train.py", "--config", "conf.yaml", "--lr", "0.1", "--precision", "fp32", "--tag", "run-{seed}"];
    const resolved = await resolveBindings(command, dir, []);
    const code: KnobBinding = { knob: "accumulation", via: "code", file: join(dir, "train.py"), line: 7, name: "accum", value: 1 };
    const launch = await launchWithKnobs(
      command,
      [...resolved.bindings, code],
      { batch_size: 64, num_workers: 2, precision: "bf16-mixed", seed: 3, accumulation: 4 },
      { copyTag: { kind: "plan", owner: OWNER, index: 1 }, documents: resolved.documents, cwd: dir },
    );
    const copy = copyPathOf(join(dir, "conf.yaml"), "plan", OWNER, 1);
    expect(copy).toBe(join(dir, `.conf.yaml.brim-plan-${OWNER}-1.yaml`));
    expect(launch.copies).toEqual([copy]);
    expect(launch.command).toEqual(["python", "train.py", "--config", copy, "--lr", "0.1", "--precision", "bf16-mixed", "--tag", "run-3"]);
    // only the values change: the comment and the layout stay
    expect(readFileSync(copy, "utf8")).toBe("data:\n  batch_size: 64  # the micro-batch\n  num_workers: 2\n");
    expect(readFileSync(join(dir, "conf.yaml"), "utf8")).toBe("data:\n  batch_size: 32  # the micro-batch\n  num_workers: 0\n");
    expect(JSON.parse(launch.env.BRIM_CODE_KNOBS ?? "[]")).toEqual([{ file: join(dir, "train.py"), line: 7, name: "accum", value: 4 }]);
    expect((await brimCopiesOf(join(dir, "conf.yaml"))).map((c) => [c.kind, c.owner, c.index])).toEqual([["plan", OWNER, 1]]);
    launch.cleanup();
    launch.cleanup();
    expect(existsSync(copy)).toBe(false);
  });

  it("writes no copy of a config the command does not name, and none where no value changes a key", async () => {
    const dir = join(root, "none");
    mkdirSync(dir);
    writeFileSync(join(dir, "conf.yaml"), "batch_size: 32\n");
    const command = ["python", "train.py", "--config", "conf.yaml"];
    const resolved = await resolveBindings(command, dir, []);
    const launch = await launchWithKnobs(
      command,
      resolved.bindings,
      { stage: "long" },
      {
        copyTag: { kind: "trial", owner: OWNER, index: 0 },
        documents: resolved.documents,
        cwd: dir,
      },
    );
    expect(launch.copies).toEqual([]);
    expect(launch.command).toEqual(command);
    // every run of a tune starts from one seed of torch's generator, whatever its knobs
    expect(launch.env).toEqual({ BRIM_SEED: String(TRIAL_SEED) });
    expect(readdirSync(dir)).toEqual(["conf.yaml"]);
  });

  it("leaves no copy behind when one cannot be written or a template has no value", async () => {
    const dir = join(root, "fails");
    mkdirSync(dir);
    writeFileSync(join(dir, "conf.yaml"), "batch_size: 32\n");
    const command = ["python", "train.py", "--config", "conf.yaml", "--tag", "{missing}"];
    const resolved = await resolveBindings(command, dir, []);
    const tag = { kind: "trial" as const, owner: OWNER, index: 2 };
    await expect(launchWithKnobs(command, resolved.bindings, { batch_size: 8 }, { copyTag: tag, documents: resolved.documents, cwd: dir })).rejects.toThrow(
      /the command uses \{missing\}/,
    );
    expect(readdirSync(dir)).toEqual(["conf.yaml"]);
    if (process.getuid?.() === 0) return; // root writes into a read-only folder
    chmodSync(dir, 0o555);
    try {
      await expect(
        launchWithKnobs(command.slice(0, 4), resolved.bindings, { batch_size: 8 }, { copyTag: tag, documents: resolved.documents, cwd: dir }),
      ).rejects.toThrow();
    } finally {
      chmodSync(dir, 0o755);
    }
    expect(readdirSync(dir)).toEqual(["conf.yaml"]);
  });
});
