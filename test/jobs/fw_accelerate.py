"""A loop on the real accelerate `Accelerator` with gradient accumulation (`accelerator.accumulate`)
and `--mixed-precision` (no, bf16) on CPU."""

import argparse

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

from fw_meter import Meter

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--accumulate", type=int, default=4)
p.add_argument("--mixed-precision", default="bf16")
p.add_argument("--max-steps", type=int, default=1000)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)

accelerator = Accelerator(cpu=True, gradient_accumulation_steps=args.accumulate, mixed_precision=args.mixed_precision)
data = TensorDataset(torch.randn(8192, 32), torch.randint(0, 4, (8192,)))
model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
model, opt, loader = accelerator.prepare(model, opt, DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True))
meter = Meter(args.batch_size * args.accumulate)
steps = 0
while steps < args.max_steps:
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
        if accelerator.sync_gradients:
            steps += 1
            meter.step()
            if steps >= args.max_steps:
                break
