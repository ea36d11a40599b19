import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { editConfigText, readConfig } from "../../src/configs/index.ts";
import { candidateValues, INTEGER_KNOBS, knobOfName, lonePartners, withHeld } from "../../src/knobs/lists.ts";
import { nearPowers } from "../../src/knobs/specs.ts";
import { findArgvKnobs, rewriteArgv } from "../../src/knobs/argv.ts";
import { resolveBindings } from "../../src/knobs/resolve.ts";
import { namedSection } from "../../src/knobs/keyed-section.ts";
import { configEditsByFile } from "../../src/knobs/binding.ts";

const REPO = resolve(import.meta.dirname, "..", "..");
const root = mkdtempSync(join(tmpdir(), "brim-rl-knobs-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const cpu = { backend: "cpu", bf16: false, tensorCores: false, cpus: 2 } as const;

/** rl_zoo3's hyperparameter file shape: one section per environment id, two of them. */
const ZOO = `# keyed by environment id
CartPole-v1:
  n_envs: 4
  n_timesteps: !!float 1e6
  policy: 'MlpPolicy'
  n_steps: 128        # per environment
  batch_size: 64
  n_epochs: 4
Pendulum-v1:
  n_envs: 8
  n_steps: 1024
  batch_size: 256
  n_epochs: 10
`;

describe("the reinforcement-learning knobs in the knob table", () => {
  it("names the environments, the rollout length and the minibatches under their usual keys, as whole numbers", () => {
    expect(knobOfName("n_envs")).toBe("num_envs");
    expect(knobOfName("num_envs")).toBe("num_envs");
    expect(knobOfName("n_steps")).toBe("rollout_steps");
    expect(knobOfName("num_steps")).toBe("rollout_steps");
    expect(knobOfName("num_minibatches")).toBe("num_minibatches");
    // passes over a rollout reuse the same transitions: more of them would count samples no environment made
    expect(knobOfName("n_epochs")).toBeNull();
    expect(knobOfName("epochs")).toBeNull();
    for (const knob of ["num_envs", "rollout_steps", "num_minibatches"]) expect(INTEGER_KNOBS.has(knob), knob).toBe(true);
  });

  it("tries powers of two from a quarter to four times the job's value, walked up from it", () => {
    expect(nearPowers(4)).toEqual([1, 2, 4, 8, 16]);
    expect(nearPowers(128)).toEqual([32, 64, 128, 256, 512]);
    expect(nearPowers(6)).toEqual([2, 4, 6, 8, 16]);
    expect(nearPowers(0)).toEqual([]);
    expect(nearPowers("4")).toEqual([]);
    expect(candidateValues(["num_envs", "rollout_steps"], { num_envs: 16, rollout_steps: 16 }, cpu)).toEqual([
      { knob: "num_envs", values: [4, 8, 16, 32, 64] },
      { knob: "rollout_steps", values: [4, 8, 16, 32, 64] },
    ]);
  });

  it("keeps the rollout (num_envs × rollout_steps) when the environments change and the job has both", () => {
    expect(withHeld({ num_envs: 4, rollout_steps: 128, batch_size: 64 }, "num_envs", 8)).toEqual({ num_envs: 8, rollout_steps: 64, batch_size: 64 });
    expect(withHeld({ num_envs: 4, rollout_steps: 128 }, "num_envs", 1)).toEqual({ num_envs: 1, rollout_steps: 512 });
    expect(withHeld({ num_envs: 4, rollout_steps: 128 }, "num_envs", 3)).toBeNull();
    // without a rollout knob the rollout grows with the environments (said with the trial)
    expect(withHeld({ num_envs: 4 }, "num_envs", 8)).toEqual({ num_envs: 8 });
    // the rollout length on its own changes the rollout: nothing is held
    expect(withHeld({ num_envs: 4, rollout_steps: 128 }, "rollout_steps", 256)).toEqual({ num_envs: 4, rollout_steps: 256 });
    expect(withHeld({ batch_size: 8 }, "batch_size", 16)).toEqual({ batch_size: 16 });
  });

  it("counts a rollout-length name only beside a number of environments", () => {
    expect(lonePartners(["batch_size", "rollout_steps"])).toEqual(["rollout_steps"]);
    expect(lonePartners(["num_envs", "rollout_steps", "num_minibatches"])).toEqual([]);
  });
});

describe("finding and rewriting them in configs and on command lines", () => {
  it("the bundled ppo example: env.num_envs and ppo.rollout_steps beside the minibatch, not ppo.epochs", async () => {
    const dir = join(REPO, "examples", "ppo");
    const { bindings } = await resolveBindings(["python", join(dir, "train.py"), "--config", join(dir, "config.yaml")], dir, []);
    const found = bindings.map((b) => (b.via === "config" ? `${b.knob}=${b.key}` : b.knob));
    expect(found).toEqual(expect.arrayContaining(["num_envs=env.num_envs", "rollout_steps=ppo.rollout_steps", "batch_size=data_loader.batch_size"]));
    expect(found.some((f) => f.includes("epochs"))).toBe(false);
  });

  it("rl_zoo3's file keyed by environment id: the section --env names, found and rewritten there alone", async () => {
    const file = join(root, "ppo.yml");
    writeFileSync(file, ZOO);
    const command = ["python", "-m", "rl_zoo3.train", "--algo", "ppo", "--env", "CartPole-v1", "--vec-env", "subproc", "--conf-file", "ppo.yml"];
    const { bindings, documents, notes } = await resolveBindings(command, root, []);
    const keys = bindings.map((b) => (b.via === "config" ? `${b.knob}=${b.key}` : b.knob));
    expect(keys).toEqual(expect.arrayContaining(["num_envs=CartPole-v1.n_envs", "rollout_steps=CartPole-v1.n_steps", "batch_size=CartPole-v1.batch_size"]));
    expect(notes.join("\n")).not.toMatch(/several keys could hold it/);
    const doc = documents.get(file);
    if (doc === undefined) throw new Error("the config was not read");
    const edits = configEditsByFile(bindings, { num_envs: 8, rollout_steps: 64, batch_size: 64 }).get(file) ?? [];
    const after = editConfigText(doc, edits).text;
    expect(after).toContain("CartPole-v1:\n  n_envs: 8\n");
    // the comment keeps its column
    expect(after).toContain("  n_steps: 64         # per environment\n");
    // the other environment's section and the tags stay as they were
    expect(after.slice(after.indexOf("Pendulum-v1:"))).toBe(ZOO.slice(ZOO.indexOf("Pendulum-v1:")));
    expect(after).toContain("n_timesteps: !!float 1e6");
    // the same file for an environment it has no section for: ambiguous, said, nothing bound
    const other = await resolveBindings(["python", "-m", "rl_zoo3.train", "--env", "Acrobot-v1", "--conf-file", "ppo.yml"], root, []);
    expect(other.bindings.filter((b) => b.via === "config")).toEqual([]);
    expect(other.notes.join("\n")).toMatch(/knob num_envs: several keys could hold it \(CartPole-v1\.n_envs, Pendulum-v1\.n_envs\)/);
    expect((await readConfig(file)).text).toBe(ZOO);
  });

  it("takes the named section only from a file of several sections, by an argument or --flag=value", () => {
    const data = { "CartPole-v1": { n_envs: 4 }, "Pendulum-v1": { n_envs: 8 } };
    expect(namedSection(data, ["python", "train.py", "--env=Pendulum-v1"])).toEqual({ "Pendulum-v1": { n_envs: 8 } });
    expect(namedSection(data, ["python", "train.py"])).toBe(data);
    const plain = { data: { batch_size: 8 }, seed: 0 };
    expect(namedSection(plain, ["python", "train.py", "data"])).toBe(plain);
  });

  it("a num_steps key or flag with no number of environments beside it is a training length: left alone, and said", async () => {
    const file = join(root, "lm.yaml");
    writeFileSync(file, "trainer:\n  num_steps: 1000\n  batch_size: 8\n");
    const lone = await resolveBindings(["python", "train.py", "--config", "lm.yaml"], root, []);
    expect(lone.bindings.map((b) => b.knob)).toEqual(["batch_size"]);
    expect(lone.notes.join("\n")).toMatch(/rollout_steps: trainer\.num_steps left alone: the job has no num_envs knob beside it/);
    const flag = await resolveBindings(["python", "train.py", "--num-steps", "500", "--batch-size", "8"], root, []);
    expect(flag.bindings.map((b) => b.knob)).toEqual(["batch_size"]);
    expect(flag.notes.join("\n")).toMatch(/rollout_steps: --num-steps left alone/);
    // bound by the user, it stays
    const bound = await resolveBindings(["python", "train.py", "--config", "lm.yaml"], root, [
      { knob: "rollout_steps", via: "config", file, key: "trainer.num_steps" },
    ]);
    expect(bound.bindings.map((b) => b.knob)).toContain("rollout_steps");
  });

  it("CleanRL's flags: --num-envs, --num-steps, --num-minibatches found and rewritten in the form written", async () => {
    const command = ["python", "ppo.py", "--num-envs", "4", "--num-steps=128", "--num-minibatches", "4", "--update-epochs", "4"];
    const found = findArgvKnobs(command).found;
    expect(found.map((f) => `${f.knob}=${String(f.value)}`)).toEqual(["num_envs=4", "rollout_steps=128", "num_minibatches=4"]);
    expect(rewriteArgv(command, found, { num_envs: 8, rollout_steps: 64, num_minibatches: 4 })).toEqual([
      "python",
      "ppo.py",
      "--num-envs",
      "8",
      "--num-steps=64",
      "--num-minibatches",
      "4",
      "--update-epochs",
      "4",
    ]);
    const { bindings } = await resolveBindings(command, root, []);
    expect(bindings.map((b) => b.knob)).toEqual(["num_envs", "rollout_steps", "num_minibatches"]);
  });
});
