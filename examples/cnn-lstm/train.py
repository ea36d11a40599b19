#!/usr/bin/env python3
"""1-D CNN + LSTM sensor classifier reading .npy files from disk, with CPU augmentation in the
Dataset (noise, time and channel masking, scaling) or, optionally, the same augmentation on the GPU.

    python examples/cnn-lstm/train.py --config examples/cnn-lstm/config.yaml [--steps N] [--print-params]

The architecture is read from model.yaml (the spec `brim plan` reads). Data: synthetic 6-channel
IMU-like recordings (accelerometer + gyroscope), one class per activity pattern, generated
deterministically once into a cache folder (examples/cnn-lstm/.data/ by default) as one .npy file
per recording, then read back from disk by the Dataset like a real sensor corpus.
"""
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

brim = common.import_brim()
import brim.torch as bt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402


# ---------------------------------------------------------------- model (docs/model-spec.md `cnn1d-lstm`)
class CNNLSTM(nn.Module):
    def __init__(self, spec):
        super().__init__()
        layers, prev, pool = [], spec["input"], spec.get("pool", 1)
        for c in spec["conv"]:
            k = c["kernel"]
            layers.append(nn.Conv1d(prev, c["out"], k, stride=c.get("stride", 1), padding=k // 2))
            if spec.get("batchnorm", False):
                layers.append(nn.BatchNorm1d(c["out"]))
            layers.append(nn.ReLU())
            if pool > 1:
                layers.append(nn.MaxPool1d(pool))
            prev = c["out"]
        self.conv = nn.Sequential(*layers)
        lstm = spec["lstm"]
        bi = bool(lstm.get("bidirectional", False))
        self.lstm = nn.LSTM(prev, lstm["hidden"], lstm.get("layers", 1), batch_first=True, bidirectional=bi)
        self.head = nn.Linear(lstm["hidden"] * (2 if bi else 1), spec["output"])

    def forward(self, x):                        # (B, channels, seq_len)
        h = self.conv(x).transpose(1, 2)         # (B, L', C)
        out, _ = self.lstm(h)
        return self.head(out[:, -1])


# ---------------------------------------------------------------- data on disk
def generate(root, n, channels, seq_len, classes, seed):
    """Write n recordings as <root>/<key>/x_00000.npy ... and labels.npy, once. The folder name is
    a hash of the generation parameters; a half-written folder is never used (atomic rename)."""
    params = dict(n=n, channels=channels, seq_len=seq_len, classes=classes, seed=seed, version=1)
    key = hashlib.sha1(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    final = Path(root) / key
    if (final / "labels.npy").exists():
        return final
    Path(root).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    rng = np.random.default_rng(seed)
    t = np.arange(seq_len, dtype=np.float32) / 50.0             # 50 Hz sampling
    labels = rng.integers(0, classes, size=n)
    freq = 0.5 + 0.4 * np.arange(classes)                        # each activity has its own cadence
    burst_rate = 0.002 + 0.004 * (np.arange(classes) % 4)        # ... and its own rate of turns
    for i, c in enumerate(labels):
        phase = rng.uniform(0, 2 * np.pi, size=(channels, 1))
        amp = (0.5 + (c % 3) * 0.5) * rng.uniform(0.8, 1.2, size=(channels, 1))
        x = amp * np.sin(2 * np.pi * freq[c] * (1 + 0.05 * rng.standard_normal()) * t + phase)
        x[2 % channels] += 1.0                                   # gravity on the accelerometer's z
        spikes = rng.random(seq_len) < burst_rate[c]
        kernel = np.exp(-np.linspace(-2, 2, 25) ** 2)
        bursts = np.convolve(spikes.astype(np.float32), kernel, mode="same")
        x[channels // 2:] += bursts * rng.uniform(1, 2, size=(channels - channels // 2, 1))
        x += 0.3 * rng.standard_normal(x.shape)
        np.save(tmp / f"x_{i:05d}.npy", x.astype(np.float32))
    np.save(tmp / "labels.npy", labels.astype(np.int64))
    try:
        os.rename(tmp, final)
    except OSError:                                              # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def augment(x, cfg, gen=None):
    """Noise, random amplitude scaling, one masked time span and masked channels. x: (..., C, L);
    the same code runs per sample on the CPU (in the Dataset) and batched on the GPU."""
    shape, dev = x.shape, x.device
    lead = shape[:-1]
    x = x * (1 + cfg["scale"] * (2 * torch.rand(*shape[:-2], 1, 1, device=dev, generator=gen) - 1))
    x = x + cfg["noise"] * torch.randn(shape, device=dev, generator=gen)
    L = shape[-1]
    span = int(cfg["time_mask"] * L)
    if span:
        start = (torch.rand(*shape[:-2], 1, 1, device=dev, generator=gen) * (L - span)).long()
        pos = torch.arange(L, device=dev)
        x = x.masked_fill((pos >= start) & (pos < start + span), 0.0)
    keep = torch.rand(*lead, 1, device=dev, generator=gen) >= cfg["channel_mask"]
    return x * keep


class SensorFiles(Dataset):
    def __init__(self, folder, augment_cfg=None, latency_s=0.0):
        self.files = sorted(Path(folder).glob("x_*.npy"))
        self.labels = np.load(Path(folder) / "labels.npy")
        self.augment_cfg = augment_cfg
        self.latency_s = latency_s

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        if self.latency_s:
            time.sleep(self.latency_s)                          # the network mount's wait per file (simulated)
        x = torch.from_numpy(np.load(self.files[i]))            # read from disk every time, like real data
        if self.augment_cfg:
            x = augment(x, self.augment_cfg)                    # CPU augmentation (in the loader workers)
        return x, int(self.labels[i])


# ---------------------------------------------------------------- job
def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    cfg = common.load_config(args.config, args.set)
    spec = common.load_spec(cfg)
    common.seed_all(int(common.get(cfg, "seed", 0)))
    model = CNNLSTM(spec)
    if args.print_params:
        common.print_params(model)
        return

    batch_size = brim.knob("batch_size", default=int(cfg["data_loader"]["batch_size"]))
    accumulation = brim.knob("accumulation",
                             default=int(common.get(cfg, "training.trainer.accumulate_grad_batches", 1)))
    precision = brim.knob("precision", default=str(common.get(cfg, "training.precision", "fp32")))
    aug = dict(cfg["augment"])
    on_gpu = brim.knob("gpu_augment", default=bool(aug.pop("on_gpu", False)))
    bt.apply_cap()
    bt.configure()
    dev = common.device(cfg)

    data = cfg["data"]
    cache = Path(cfg["_dir"]) / data.get("cache_dir", ".data")
    folder = generate(cache, int(data["n_files"]), spec["input"], int(spec["seq_len"]), spec["output"],
                      int(data["seed"]))
    latency_s = float(data.get("storage_latency_ms", 0)) / 1000
    dataset = SensorFiles(folder, None if on_gpu else aug, latency_s)
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
        if on_gpu:
            x = augment(x, aug)                                 # batched, on the training device
        return F.cross_entropy(model(x).float(), y)

    step = bt.TrainStep(model, optimizer, loss_fn, precision=precision, accumulation=accumulation, device=dev)
    limit = common.step_limit(args, cfg, brim)
    summary = common.Summary("cnn-lstm")
    model.train()
    with brim.track(common.epochs(lambda epoch: loader)) as tracker:      # one reported step per batch; stops at brim's budget
        for x, y in tracker:
            loss = step((x, y))      # TrainStep notes loss, micro-batch and accumulation in the step report
            summary.step(x.shape[0], loss)
            if limit is not None and summary.steps >= limit:
                break
    summary.print(batch_size=batch_size, accumulation=accumulation, precision=precision,
                  augment="gpu" if on_gpu else "cpu", device=dev.type)


if __name__ == "__main__":
    main()
