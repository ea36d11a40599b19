"""A job whose config fixes the batch per optimizer step (`train.global_batch_size`) beside its
micro-batch (`train.micro_batch_size`), and derives its accumulation from the two, as LLM
pre-training CLIs do: a micro-batch that does not divide the global batch ends it with an
assertion. Each micro-step also waits 20 ms (a fixed cost per forward, as a launch-bound GPU step
has), so a smaller micro-batch is slower. Usage: python global_batch_config.py config.yaml [--steps N]"""

import argparse
import time

import torch
import yaml
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("config")
p.add_argument("--steps", type=int, default=20)
args = p.parse_args()
with open(args.config) as f:
    train = yaml.safe_load(f)["train"]
micro, global_batch = int(train["micro_batch_size"]), int(train["global_batch_size"])
assert global_batch % micro == 0, "global_batch_size must be divisible by micro_batch_size"
accumulation = global_batch // micro
print("global batch %d: %d micro-steps of %d" % (global_batch, accumulation, micro), flush=True)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = DataLoader(TensorDataset(torch.randn(512, 16), torch.randn(512, 1)), batch_size=micro, shuffle=True, drop_last=True)
batches = iter(data)
for step in range(args.steps):
    opt.zero_grad()
    for _ in range(accumulation):
        try:
            x, y = next(batches)
        except StopIteration:
            batches = iter(data)
            x, y = next(batches)
        (torch.nn.functional.mse_loss(model(x), y) / accumulation).backward()
        time.sleep(0.02)
    opt.step()
print("done", flush=True)
