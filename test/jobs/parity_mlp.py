"""A small MLP (no brim import) for loss parity: a seeded, shuffled DataLoader, gradient accumulation
(each micro-batch's loss divided by it), plain SGD. With micro-batch x accumulation held, two runs
see the same samples in each optimizer step, so their losses agree step by step (fp32) unless a
BatchNorm (--batchnorm) or a learning rate scaled from the micro-batch (--lr-per-sample) changes the
model. --sleep-ms waits that long for each micro-batch, so that fewer, larger micro-batches are
clearly faster on any machine (a tune's search then picks them, whatever the load)."""

import argparse
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--accumulation", type=int, default=1)
p.add_argument("--max-steps", type=int, default=100000)
p.add_argument("--hidden", type=int, default=64)
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--lr-per-sample", type=float, default=None, help="lr = this x the micro-batch (a script that scales its LR)")
p.add_argument("--batchnorm", action="store_true")
p.add_argument("--sleep-ms", type=float, default=0.0)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
x_all = torch.randn(4096, 32)
y_all = (x_all @ torch.randn(32, 10)).argmax(dim=1)
loader = DataLoader(TensorDataset(x_all, y_all), batch_size=args.batch_size, shuffle=True, drop_last=True,
                    generator=torch.Generator().manual_seed(1))
layers = [torch.nn.Linear(32, args.hidden)]
if args.batchnorm:
    layers.append(torch.nn.BatchNorm1d(args.hidden))
layers += [torch.nn.ReLU(), torch.nn.Linear(args.hidden, 10)]
model = torch.nn.Sequential(*layers)
lr = args.lr if args.lr_per_sample is None else args.lr_per_sample * args.batch_size
opt = torch.optim.SGD(model.parameters(), lr=lr)

step = 0
micro = 0
while step < args.max_steps:
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y) / args.accumulation
        loss.backward()
        if args.sleep_ms > 0:
            time.sleep(args.sleep_ms / 1000)
        micro += 1
        if micro % args.accumulation == 0:
            opt.step()
            opt.zero_grad()
            step += 1
            if step % 50 == 0:
                print("step %d loss %.5f" % (step, loss.item() * args.accumulation), flush=True)
            if step >= args.max_steps:
                break
