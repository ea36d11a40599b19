#!/usr/bin/env python3
"""LSTM or Transformer forecaster on multi-timeframe market features, instrumented with brim.

    python examples/lstm-transformer/train.py --config examples/lstm-transformer/config.yaml [--steps N]
    ... --set model.kind=transformer        # or edit model.kind in the config

The architecture is read from lstm.yaml / transformer.yaml (the specs `brim plan` reads). Data: a
synthetic price series per instrument; features are returns, volatility and moving-average deviation
over 8 timeframes (1 to 128 bars) = 24 features per step; the target is the return over the next
`horizon` bars.
"""
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

TIMEFRAMES = (1, 2, 4, 8, 16, 32, 64, 128)


# ---------------------------------------------------------------- models (docs/model-spec.md)
class LSTMForecaster(nn.Module):
    """`lstm` / `gru` family: the recurrent stack, then Linear(hidden·directions, output) on the last step."""

    def __init__(self, spec):
        super().__init__()
        rnn = nn.GRU if spec["family"] == "gru" else nn.LSTM
        bi = bool(spec.get("bidirectional", False))
        self.rnn = rnn(spec["input"], spec["hidden"], spec.get("layers", 1), batch_first=True, bidirectional=bi)
        self.head = nn.Linear(spec["hidden"] * (2 if bi else 1), spec.get("output", 1))

    def forward(self, x):                   # (B, T, input)
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


class Block(nn.Module):
    """Pre-norm (or post-norm) encoder block: q, k, v, o projections, two LayerNorms, feed-forward."""

    def __init__(self, d, heads, ffn, act, norm_first):
        super().__init__()
        self.heads, self.norm_first = heads, norm_first
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ffn_in, self.ffn_out, self.act = nn.Linear(d, ffn), nn.Linear(ffn, d), act

    def attn(self, x):
        B, T, D = x.shape
        q, k, v = (p(x).view(B, T, self.heads, D // self.heads).transpose(1, 2) for p in (self.q, self.k, self.v))
        if hasattr(F, "scaled_dot_product_attention"):          # torch 2.x: fused kernels
            y = F.scaled_dot_product_attention(q, k, v)
        else:                                                  # torch 1.13
            y = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, T, D))

    def ffn(self, x):
        return self.ffn_out(self.act(self.ffn_in(x)))

    def forward(self, x):
        if self.norm_first:
            x = x + self.attn(self.ln1(x))
            return x + self.ffn(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ffn(x))


ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "silu": nn.SiLU}


class TransformerForecaster(nn.Module):
    """`transformer-encoder` family with continuous input: Linear(input, d_model) + learned positions."""

    def __init__(self, spec):
        super().__init__()
        d = spec["d_model"]
        self.inp = nn.Linear(spec["input"], d)
        self.pos = nn.Embedding(spec["max_positions"], d)
        act = ACTIVATIONS[spec.get("activation", "gelu")]()
        self.blocks = nn.ModuleList(Block(d, spec["heads"], spec["ffn"], act, spec.get("norm_first", True))
                                    for _ in range(spec["layers"]))
        self.norm = nn.LayerNorm(d) if spec.get("final_norm", True) else nn.Identity()
        self.pooling = spec.get("pooling", "last")
        if self.pooling not in ("last", "mean"):
            raise ValueError("this forecaster pools with 'last' or 'mean'")
        self.head = nn.Linear(d, spec["output"])

    def forward(self, x):                   # (B, T, input)
        h = self.inp(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        for block in self.blocks:
            h = block(h)
        h = self.norm(h)
        return self.head(h[:, -1] if self.pooling == "last" else h.mean(1))


def build(spec):
    if spec["family"] in ("lstm", "gru"):
        return LSTMForecaster(spec)
    if spec["family"] == "transformer-encoder":
        return TransformerForecaster(spec)
    raise ValueError(f"unsupported family {spec['family']!r}")


# ---------------------------------------------------------------- data
def multi_timeframe_features(n_series, length, horizon, seed):
    """Features (N, T, 24) and targets (N, T): returns, realised volatility and deviation from the
    moving average over each timeframe, each standardised; target = next `horizon`-bar log return."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(length, dtype=torch.float64)
    vol = 0.01 * torch.exp(0.5 * torch.sin(2 * math.pi * t / 500 + 6.3 * torch.rand(n_series, 1, generator=g)))
    r = torch.randn(n_series, length, generator=g, dtype=torch.float64) * vol
    r[:, 1:] += 0.1 * r[:, :-1]                                        # a little momentum to learn
    logp = r.cumsum(1)
    c_r2 = F.pad((r ** 2).cumsum(1), (1, 0))
    c_p = F.pad(logp.cumsum(1), (1, 0))
    feats = []
    for k in TIMEFRAMES:
        idx = torch.arange(length)
        lo = (idx - k + 1).clamp(min=0)
        n = (idx - lo + 1).to(torch.float64)
        ret = logp - logp[:, lo.clamp(min=1) - 1] * (lo > 0)           # k-bar return
        realised = ((c_r2[:, idx + 1] - c_r2[:, lo]) / n).sqrt()       # k-bar volatility
        ma_dev = logp - (c_p[:, idx + 1] - c_p[:, lo]) / n             # distance to the k-bar mean
        feats += [ret, realised, ma_dev]
    x = torch.stack(feats, dim=-1)
    x = (x - x.mean((0, 1))) / (x.std((0, 1)) + 1e-12)
    y = torch.zeros(n_series, length, dtype=torch.float64)
    y[:, :-horizon] = logp[:, horizon:] - logp[:, :-horizon]
    y = y / y[:, :-horizon].std()
    return x.float(), y.float()


class Windows(Dataset):
    def __init__(self, x, y, seq_len, horizon, warmup=max(TIMEFRAMES)):
        self.x, self.y, self.T = x, y, seq_len
        n, length, _ = x.shape
        self.index = [(i, e) for i in range(n) for e in range(warmup + seq_len, length - horizon)]

    def __len__(self):
        return len(self.index)

    def __getitem__(self, idx):
        i, end = self.index[idx]
        return self.x[i, end - self.T:end], self.y[i, end - 1:end]


# ---------------------------------------------------------------- job
def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    cfg = common.load_config(args.config, args.set)
    kind = brim.knob("model_kind", default=str(cfg["model"]["kind"]))
    spec = common.load_spec(cfg, cfg["model"]["specs"][kind])
    common.seed_all(int(common.get(cfg, "seed", 0)))
    model = build(spec)
    if args.print_params:
        common.print_params(model)
        return

    batch_size = brim.knob("batch_size", default=int(cfg["data_loader"]["batch_size"]))
    accumulation = brim.knob("accumulation",
                             default=int(common.get(cfg, "training.trainer.accumulate_grad_batches", 1)))
    precision = brim.knob("precision", default=str(common.get(cfg, "training.precision", "fp32")))
    bt.apply_cap()
    bt.configure()
    dev = common.device(cfg)

    data = cfg["data"]
    seq_len = int(spec.get("seq_len", 128))
    x, y = multi_timeframe_features(int(data["n_series"]), int(data["length"]), int(data["horizon"]), int(data["seed"]))
    dataset = Windows(x, y, seq_len, int(data["horizon"]))
    dl = cfg["data_loader"]
    loader_kw = bt.loader_kwargs(num_workers=int(dl.get("num_workers", 0)),
                                 pin_memory=bool(dl.get("pin_memory", False)),
                                 persistent_workers=bool(dl.get("persistent_workers", False)),
                                 prefetch_factor=dl.get("prefetch_factor"))
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(int(data["seed"])), **loader_kw)

    model.to(dev)
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(common.get(cfg, "training.lr", 3e-4)))

    def loss_fn(model, batch):
        xb, yb = batch                    # already on the device: TrainStep moves batches
        return F.mse_loss(model(xb).float(), yb)

    step = bt.TrainStep(model, optimizer, loss_fn, precision=precision, accumulation=accumulation, device=dev)
    limit = common.step_limit(args, cfg, brim)
    summary = common.Summary(f"lstm-transformer/{kind}")
    model.train()
    with brim.track(common.epochs(lambda epoch: loader)) as tracker:      # one reported step per batch; stops at brim's budget
        for xb, yb in tracker:
            loss = step((xb, yb))      # TrainStep notes loss, micro-batch and accumulation in the step report
            summary.step(xb.shape[0], loss)
            if limit is not None and summary.steps >= limit:
                break
    summary.print(batch_size=batch_size, accumulation=accumulation, precision=precision, device=dev.type)


if __name__ == "__main__":
    main()
