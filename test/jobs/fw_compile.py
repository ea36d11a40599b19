"""A plain loop on a `torch.compile`d model (inductor on CPU): the first steps compile, the rest
run the compiled graph."""

import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

from fw_meter import Meter

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--max-steps", type=int, default=1000)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)

data = TensorDataset(torch.randn(8192, 32), torch.randint(0, 4, (8192,)))
model = torch.compile(torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
meter = Meter(args.batch_size)
steps = 0
while steps < args.max_steps:
    for x, y in DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        meter.step()
        if steps >= args.max_steps:
            break
