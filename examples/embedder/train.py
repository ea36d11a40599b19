#!/usr/bin/env python3
"""Text encoder with LoRA adapters (base frozen) and a mixture-of-experts block, trained with a
contrastive loss (each anchor with its own positives and negatives) through curriculum stages.

    python examples/embedder/train.py --config examples/embedder/config.yaml [--steps N] [--stage NAME]

The architecture is read from model.yaml (the spec `brim plan` reads). Data: synthetic token
sequences from topics; a positive shares its anchor's topic and part of its tokens, a negative comes
from another (often neighbouring) topic. Each stage of `stages:` in the config sets its sequence
length, positives and negatives per anchor, micro-batch and accumulation.
"""
import itertools
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

brim = common.import_brim()
import brim.torch as bt  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "silu": nn.SiLU}


# ---------------------------------------------------------------- model (docs/model-spec.md `transformer-encoder`)
class LoRALinear(nn.Module):
    """A frozen base Linear plus a trained low-rank update B·A, scaled by alpha/rank (B starts at 0)."""

    def __init__(self, d_in, d_out, rank, alpha):
        super().__init__()
        self.base = nn.Linear(d_in, d_out)
        self.A = nn.Linear(d_in, rank, bias=False)
        self.B = nn.Linear(rank, d_out, bias=False)
        nn.init.zeros_(self.B.weight)
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + self.B(self.A(x)) * self.scale


class MoE(nn.Module):
    """Router Linear(d, experts, bias=False) and `experts` feed-forwards; each token goes through its
    top_k experts, weighted by the softmax of their router logits (sparse dispatch)."""

    def __init__(self, d, experts, top_k, ffn, act, linear):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(linear(d, ffn), act, linear(ffn, d)) for _ in range(experts))

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        weights, chosen = self.router(x).topk(self.top_k, dim=-1)
        weights = torch.softmax(weights, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = (chosen == e).nonzero(as_tuple=True)
            if token.numel():
                out = out.index_add(0, token, (expert(x[token]) * weights[token, slot, None]).to(out.dtype))
        return out.reshape(shape)


class Block(nn.Module):
    def __init__(self, spec, index):
        super().__init__()
        d, act = spec["d_model"], ACTIVATIONS[spec.get("activation", "gelu")]()
        lora = spec.get("lora") or {}
        targets = set(lora.get("targets", []))

        def linear(name, d_in, d_out):
            return LoRALinear(d_in, d_out, lora["rank"], lora["alpha"]) if name in targets else nn.Linear(d_in, d_out)

        self.heads, self.norm_first = spec["heads"], spec.get("norm_first", True)
        self.q, self.k, self.v, self.o = (linear(n, d, d) for n in ("q", "k", "v", "o"))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        moe = spec.get("moe") or {}
        if index in moe.get("layers", []):
            self.ffn = MoE(d, moe["experts"], moe["top_k"], moe["ffn"], act, nn.Linear)
        else:
            self.ffn = nn.Sequential(linear("ffn_in", d, spec["ffn"]), act, linear("ffn_out", spec["ffn"], d))

    def attn(self, x):
        B, T, D = x.shape
        q, k, v = (p(x).view(B, T, self.heads, D // self.heads).transpose(1, 2) for p in (self.q, self.k, self.v))
        if hasattr(F, "scaled_dot_product_attention"):          # torch 2.x: fused kernels
            y = F.scaled_dot_product_attention(q, k, v)
        else:                                                  # torch 1.13
            y = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, T, D))

    def forward(self, x):
        if self.norm_first:
            x = x + self.attn(self.ln1(x))
            return x + self.ffn(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ffn(x))


class Encoder(nn.Module):
    def __init__(self, spec):
        super().__init__()
        d = spec["d_model"]
        self.tok = nn.Embedding(spec["vocab"], d)
        self.pos = nn.Embedding(spec["max_positions"], d)
        self.blocks = nn.ModuleList(Block(spec, i) for i in range(spec["layers"]))
        self.norm = nn.LayerNorm(d) if spec.get("final_norm", True) else nn.Identity()
        self.pooling = spec.get("pooling", "mean")
        self.head = nn.Linear(d, spec["output"])
        if spec.get("lora"):
            # the pretrained base is frozen; adapters, MoE routers and experts, and the head train
            for name, p in self.named_parameters():
                p.requires_grad = (".A." in name or ".B." in name or ".ffn.router." in name
                                   or ".ffn.experts." in name or name.startswith("head."))

    def forward(self, tokens):               # (N, T) -> (N, output)
        h = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            h = block(h)
        h = self.norm(h)
        return self.head(h.mean(1) if self.pooling == "mean" else h[:, -1])


# ---------------------------------------------------------------- data
class ContrastiveGroups(Dataset):
    """Sample i: a (1 + positives + negatives, seq_len) tensor of token ids — anchor, positives,
    negatives. Deterministic: each sample comes from its own seeded generator."""

    def __init__(self, size, vocab, seq_len, positives, negatives, seed, topics=64, purity=0.5, overlap=0.1):
        self.size, self.vocab, self.T = size, vocab, seq_len
        self.P, self.N, self.seed = positives, negatives, seed
        self.topics, self.purity, self.overlap = topics, purity, overlap
        self.per_topic = vocab // topics

    def __len__(self):
        return self.size

    def _sequence(self, g, topic):
        # mostly the topic's own tokens, some tokens from anywhere in the vocabulary
        own = topic * self.per_topic + (torch.rand(self.T, generator=g) ** 2 * self.per_topic).long()
        noise = torch.randint(0, self.vocab, (self.T,), generator=g)
        return torch.where(torch.rand(self.T, generator=g) < self.purity, own, noise)

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        topic = int(torch.randint(0, self.topics, (1,), generator=g))
        anchor = self._sequence(g, topic)
        group = [anchor]
        for _ in range(self.P):
            pos = self._sequence(g, topic)
            keep = torch.rand(self.T, generator=g) < self.overlap        # share part of the anchor's tokens
            group.append(torch.where(keep, anchor, pos))
        for j in range(self.N):
            # even: a hard negative from the neighbouring topic; odd: an easy one from any other topic
            shift = 1 if j % 2 == 0 else int(torch.randint(2, self.topics, (1,), generator=g))
            group.append(self._sequence(g, (topic + shift) % self.topics))
        return torch.stack(group)


def info_nce(emb, positives, temperature):
    """emb: (B, 1+P+N, D). Per anchor: -log(sum over positives / sum over all candidates) of
    exp(cos/τ). A mean over anchors, so splitting a batch keeps the loss and its gradient."""
    emb = F.normalize(emb.float(), dim=-1)
    sims = (emb[:, :1] * emb[:, 1:]).sum(-1) / temperature          # (B, P+N)
    return (torch.logsumexp(sims, dim=1) - torch.logsumexp(sims[:, :positives], dim=1)).mean()


# ---------------------------------------------------------------- job
def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    cfg = common.load_config(args.config, args.set)
    spec = common.load_spec(cfg)
    common.seed_all(int(common.get(cfg, "seed", 0)))
    model = Encoder(spec)
    if args.print_params:
        common.print_params(model)
        return

    precision = brim.knob("precision", default=str(common.get(cfg, "training.precision", "fp32")))
    bt.apply_cap()
    bt.configure()
    dev = common.device(cfg)
    model.to(dev)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=float(common.get(cfg, "training.lr", 1e-3)))
    temperature = float(common.get(cfg, "training.temperature", 0.1))

    # curriculum: all stages, or the one named by the `stage` knob / training.stage
    stages = cfg["stages"]
    only = brim.knob("stage", default=str(common.get(cfg, "training.stage", "") or ""))
    if only:
        stages = [s for s in stages if s["name"] == only]
        if not stages:
            raise SystemExit(f"embedder: no stage named {only!r} in {args.config}")
    limit = common.step_limit(args, cfg, brim)
    if args.steps is None and brim.step_budget() is None:
        limit = sum(int(s["steps"]) for s in stages)         # plain run: every stage its own steps

    dl = cfg["data_loader"]
    data = cfg["data"]
    state = {}

    def stage_settings(s):
        # per-stage values, overridden by brim's knobs for the trial
        batch = brim.knob("batch_size", default=int(common.get(s, "data_loader.batch_size", dl["batch_size"])))
        acc = brim.knob("accumulation", default=int(common.get(
            s, "training.trainer.accumulate_grad_batches",
            common.get(cfg, "training.trainer.accumulate_grad_batches", 1))))
        return batch, acc

    def stream():
        """Batches of every stage in turn; each stage runs its `steps`, the last one runs until the
        step limit (or brim's budget) stops the loop."""
        for n, s in enumerate(stages):
            batch, acc = stage_settings(s)
            dataset = ContrastiveGroups(int(data["size"]), spec["vocab"], int(s["seq_len"]),
                                        int(s["n_positives"]), int(s["n_negatives"]), int(data["seed"]))
            kw = bt.loader_kwargs(num_workers=int(dl.get("num_workers", 0)),
                                  pin_memory=bool(dl.get("pin_memory", False)),
                                  persistent_workers=bool(dl.get("persistent_workers", False)),
                                  prefetch_factor=dl.get("prefetch_factor"))
            loader = DataLoader(dataset, batch_size=batch, shuffle=True, drop_last=True,
                                generator=torch.Generator().manual_seed(int(data["seed"]) + n), **kw)
            optimizer.zero_grad(set_to_none=True)     # a partial accumulation does not cross stages
            state.update(stage=s["name"], positives=int(s["n_positives"]), batch=batch, acc=acc,
                         step=bt.TrainStep(model, optimizer, loss_fn, precision=precision, accumulation=acc,
                                           device=dev))
            print(f"[embedder] stage {s['name']}: seq_len={s['seq_len']} positives={s['n_positives']} "
                  f"negatives={s['n_negatives']} batch={batch} accumulation={acc}", flush=True)
            batches = common.epochs(lambda epoch: loader)
            if n < len(stages) - 1:
                batches = itertools.islice(batches, int(s["steps"]))
            yield from batches

    def loss_fn(model, groups):
        # (B, 1+P+N, T), already on the device: TrainStep moves batches
        B, G, T = groups.shape
        emb = model(groups.reshape(B * G, T)).reshape(B, G, -1)
        return info_nce(emb, state["positives"], temperature)

    summary = common.Summary("embedder")
    model.train()
    with brim.track(stream()) as tracker:      # one reported step per batch; stops at brim's budget
        for groups in tracker:
            loss = state["step"](groups)      # TrainStep notes loss, micro-batch and accumulation in the step report
            tracker.log(stage=state["stage"])
            summary.step(groups.shape[0], loss)
            if limit is not None and summary.steps >= limit:
                break
    summary.print(stage=state["stage"], batch_size=state["batch"], accumulation=state["acc"],
                  precision=precision, device=dev.type)


if __name__ == "__main__":
    main()
