#!/usr/bin/env python3
"""N-BEATS forecaster on market-like synthetic series, instrumented with brim.

    python examples/nbeats/train.py --config examples/nbeats/config.yaml [--steps N] [--print-params]

The architecture is read from model.yaml (the spec `brim plan` reads), so the planned and the trained
model are the same. Data: random walk + drift + weekly/daily seasonality over `features` related
channels, windows of lookback+horizon, each normalised by its last observed value.
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
from torch.utils.data import DataLoader, Dataset  # noqa: E402


# ---------------------------------------------------------------- model (docs/model-spec.md `nbeats`)
class Block(nn.Module):
    def __init__(self, spec, stack):
        super().__init__()
        L, H, F, units = spec["lookback"], spec["horizon"], spec.get("features", 1), spec["units"]
        self.L, self.H, self.F, self.type = L, H, F, stack["type"]
        layers = [nn.Linear(L * F, units), nn.ReLU()]
        for _ in range(spec.get("layers_per_block", 4) - 1):
            layers += [nn.Linear(units, units), nn.ReLU()]
        self.fc = nn.Sequential(*layers)
        t_back = torch.arange(L, dtype=torch.float32) / L          # backcast time, in [0, 1)
        t_fore = torch.arange(L, L + H, dtype=torch.float32) / L    # forecast continues it
        if self.type == "generic":
            theta = stack["theta"]
            self.theta = nn.Linear(units, 2 * theta)
            self.back = nn.Linear(theta, L * F, bias=False)
            self.fore = nn.Linear(theta, H * F, bias=False)
        elif self.type == "trend":
            p = stack["degree"] + 1
            self.theta = nn.Linear(units, 2 * p * F)
            self.register_buffer("b_basis", torch.stack([t_back ** i for i in range(p)]))  # (p, L)
            self.register_buffer("f_basis", torch.stack([t_fore ** i for i in range(p)]))  # (p, H)
        elif self.type == "seasonality":
            k = torch.arange(1, stack["harmonics"] + 1, dtype=torch.float32)[:, None]
            self.theta = nn.Linear(units, 2 * 2 * stack["harmonics"] * F)

            def fourier(t):
                return torch.cat([torch.cos(2 * math.pi * k * t), torch.sin(2 * math.pi * k * t)])
            self.register_buffer("b_basis", fourier(t_back))   # (2·harmonics, L)
            self.register_buffer("f_basis", fourier(t_fore))   # (2·harmonics, H)
        else:
            raise ValueError(f"unknown N-BEATS stack type {self.type!r}")

    def forward(self, x):                      # x: (B, F·L), channel-major
        theta = self.theta(self.fc(x))
        tb, tf = theta.chunk(2, dim=-1)
        if self.type == "generic":
            return self.back(tb), self.fore(tf)
        B = x.shape[0]
        back = tb.reshape(B, self.F, -1) @ self.b_basis    # (B, F, L)
        fore = tf.reshape(B, self.F, -1) @ self.f_basis    # (B, F, H)
        return back.reshape(B, -1), fore.reshape(B, -1)


class NBeats(nn.Module):
    def __init__(self, spec):
        super().__init__()
        if spec.get("share_weights_in_stack", False):
            # one set of weights per stack, applied `blocks` times
            self.blocks = nn.ModuleList(Block(spec, s) for s in spec["stacks"])
            self.repeats = [s["blocks"] for s in spec["stacks"]]
        else:
            self.blocks = nn.ModuleList(Block(spec, s) for s in spec["stacks"] for _ in range(s["blocks"]))
            self.repeats = [1] * len(self.blocks)

    def forward(self, x):
        residual, forecast = x, 0.0
        for block, n in zip(self.blocks, self.repeats):
            for _ in range(n):
                back, fore = block(residual)
                residual = residual - back
                forecast = forecast + fore
        return forecast


# ---------------------------------------------------------------- data
def make_series(n_series, length, features, seed):
    """Market-like series: a shared random walk (with occasional volatility bursts) + drift +
    weekly and intraday seasonality, plus per-channel noise and loadings. Deterministic."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(length, dtype=torch.float32)
    vol = 0.01 * (1 + 2 * (torch.rand(n_series, length, generator=g) < 0.02).float().cumsum(1).remainder(2))
    walk = (torch.randn(n_series, length, generator=g) * vol).cumsum(1)
    drift = (torch.randn(n_series, 1, generator=g) * 2e-4) * t
    season = (0.02 * torch.sin(2 * math.pi * t / 24 + torch.rand(n_series, 1, generator=g) * 6.3)
              + 0.03 * torch.sin(2 * math.pi * t / 168 + torch.rand(n_series, 1, generator=g) * 6.3))
    base = walk + drift + season                                             # (N, T)
    loadings = 1 + 0.5 * torch.randn(n_series, features, 1, generator=g)
    noise = 0.005 * torch.randn(n_series, features, length, generator=g)
    return 100 * torch.exp(base[:, None, :] * loadings + noise)             # (N, F, T) prices


class Windows(Dataset):
    def __init__(self, series, lookback, horizon, stride):
        self.series, self.L, self.H = series, lookback, horizon
        n, _, T = series.shape
        starts = range(0, T - lookback - horizon + 1, stride)
        self.index = [(i, s) for i in range(n) for s in starts]

    def __len__(self):
        return len(self.index)

    def __getitem__(self, idx):
        i, s = self.index[idx]
        w = self.series[i, :, s:s + self.L + self.H]
        w = torch.log(w / w[:, self.L - 1:self.L])             # log-returns relative to the last input
        return w[:, :self.L].reshape(-1), w[:, self.L:].reshape(-1)


# ---------------------------------------------------------------- job
def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    cfg = common.load_config(args.config, args.set)
    spec = common.load_spec(cfg)
    common.seed_all(int(common.get(cfg, "seed", 0)))
    model = NBeats(spec)
    if args.print_params:
        common.print_params(model)
        return

    # knobs: brim's trial values win over the config's
    batch_size = brim.knob("batch_size", default=int(cfg["data_loader"]["batch_size"]))
    accumulation = brim.knob("accumulation",
                             default=int(common.get(cfg, "training.trainer.accumulate_grad_batches", 1)))
    precision = brim.knob("precision", default=str(common.get(cfg, "training.precision", "fp32")))
    bt.apply_cap()
    bt.configure()
    dev = common.device(cfg)

    data = cfg["data"]
    series = make_series(int(data["n_series"]), int(data["length"]), spec.get("features", 1), int(data["seed"]))
    dataset = Windows(series, spec["lookback"], spec["horizon"], int(data.get("stride", 1)))
    dl = cfg["data_loader"]
    loader_kw = bt.loader_kwargs(num_workers=int(dl.get("num_workers", 0)),
                                 pin_memory=bool(dl.get("pin_memory", False)),
                                 persistent_workers=bool(dl.get("persistent_workers", False)),
                                 prefetch_factor=dl.get("prefetch_factor"))
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(int(data["seed"])), **loader_kw)

    model.to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=float(common.get(cfg, "training.lr", 1e-3)))

    def loss_fn(model, batch):
        x, y = batch                      # already on the device: TrainStep moves batches
        return nn.functional.mse_loss(model(x), y)

    step = bt.TrainStep(model, optimizer, loss_fn, precision=precision, accumulation=accumulation, device=dev)
    limit = common.step_limit(args, cfg, brim)
    summary = common.Summary("nbeats")
    model.train()
    with brim.track(common.epochs(lambda epoch: loader)) as tracker:      # one reported step per batch; stops at brim's budget
        for x, y in tracker:
            loss = step((x, y))      # TrainStep notes loss, micro-batch and accumulation in the step report
            summary.step(x.shape[0], loss)
            if limit is not None and summary.steps >= limit:
                break
    summary.print(batch_size=batch_size, accumulation=accumulation, precision=precision, device=dev.type)


if __name__ == "__main__":
    main()
