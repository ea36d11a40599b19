#!/usr/bin/env python3
"""Write the SDK-measured model profile (brim.torch.profile) of an example job's model.

    python3 bench/gpu/profile_example.py --example nbeats --config examples/nbeats/config.yaml --out p.json
    python3 bench/gpu/profile_example.py --example lstm-transformer --config ... --set model.kind=transformer --out p.json

The model is built by the example's own train.py from the same config and spec the job uses; the
sample batch has the job's shapes and dtypes and the loss is the job's. Measured on the CPU by
default (what the profile is for: planning a GPU without one); `--device cuda` measures there.
Prints one JSON line: {"ok": true, "path": ..., "precisions": [...]} or {"ok": false, "error": ...}.
"""
import argparse
import importlib.util
import json
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_example(name):
    path = REPO / "examples" / name / "train.py"
    spec = importlib.util.spec_from_file_location(f"brim_campaign_{name.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # train.py only runs main() under __main__
    return module


def build(name, mod, cfg, n):
    """(model, sample batch of n samples, loss_fn) as the job builds them."""
    import torch
    from torch.nn import functional as F
    common = mod.common
    if name == "nbeats":
        spec = common.load_spec(cfg)
        model = mod.NBeats(spec)
        f = spec.get("features", 1)
        batch = (torch.randn(n, f * spec["lookback"]), torch.randn(n, f * spec["horizon"]))
        return model, batch, lambda m, b: F.mse_loss(m(b[0]), b[1])
    if name == "lstm-transformer":
        spec = common.load_spec(cfg, cfg["model"]["specs"][str(cfg["model"]["kind"])])
        model = mod.build(spec)
        batch = (torch.randn(n, int(spec.get("seq_len", 128)), spec["input"]), torch.randn(n, 1))
        return model, batch, lambda m, b: F.mse_loss(m(b[0]).float(), b[1])
    if name == "cnn-lstm":
        spec = common.load_spec(cfg)
        model = mod.CNNLSTM(spec)
        batch = (torch.randn(n, spec["input"], spec["seq_len"]), torch.randint(0, spec["output"], (n,)))
        return model, batch, lambda m, b: F.cross_entropy(m(b[0]).float(), b[1])
    if name == "ppo":
        spec = common.load_spec(cfg)
        model = mod.ActorCritic(spec)
        ppo = cfg["ppo"]
        clip, vf, ent = float(ppo["clip"]), float(ppo["value_coef"]), float(ppo["entropy_coef"])
        a = spec["actions"]
        act = torch.randn(n, a) if model.continuous else torch.randint(0, a, (n,))
        batch = (torch.randn(n, spec["observation"]), act, torch.randn(n), torch.randn(n), torch.randn(n))

        def loss_fn(m, b):  # the job's PPO loss (examples/ppo/train.py)
            obs, act, logp_old, adv, ret = b
            d = m.dist(obs)
            ratio = torch.exp(m.log_prob(d, act) - logp_old)
            policy = -torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).mean()
            value = (m.value(obs).squeeze(-1).float() - ret).pow(2).mean()
            entropy = d.entropy().sum(-1).mean() if m.continuous else d.entropy().mean()
            return policy + vf * value - ent * entropy
        return model, batch, loss_fn
    if name == "embedder":
        spec = common.load_spec(cfg)
        model = mod.Encoder(spec)
        stage = cfg["stages"][0]
        want = str(common.get(cfg, "training.stage", "") or "")
        for s in cfg["stages"]:
            if s["name"] == want:
                stage = s
        group = 1 + int(stage["n_positives"]) + int(stage["n_negatives"])
        batch = torch.randint(0, spec["vocab"], (n, group, int(stage["seq_len"])))
        positives = int(stage["n_positives"])
        temperature = float(common.get(cfg, "training.temperature", 0.1))

        def loss_fn(m, groups):
            B, G, T = groups.shape
            emb = m(groups.reshape(B * G, T)).reshape(B, G, -1)
            return mod.info_nce(emb, positives, temperature)
        return model, batch, loss_fn
    raise SystemExit(f"profile_example: no profile builder for example {name!r}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--example", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--out", required=True)
    p.add_argument("--samples", type=int, default=8, help="sample batch size (profiled at n/2 and n)")
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    try:
        mod = load_example(args.example)
        cfg = mod.common.load_config(args.config, args.set)
        mod.common.seed_all(int(mod.common.get(cfg, "seed", 0)))
        model, batch, loss_fn = build(args.example, mod, cfg, args.samples)
        import brim.torch as bt
        model.to(args.device)
        batch = bt.to_device(batch, args.device)
        prof = bt.profile(model, batch, loss_fn, path=args.out, name=args.example)
        saved = prof.get("per_sample", {}).get("saved_bytes", {})
        print(json.dumps({"ok": True, "path": str(Path(args.out).resolve()), "precisions": sorted(saved)}))
    except Exception as exc:  # one line for the campaign's record; the trace on stderr
        traceback.print_exc()
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}))
        sys.exit(1)


if __name__ == "__main__":
    main()
