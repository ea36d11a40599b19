"""A DistributedDataParallel job for torchrun (gloo on CPU): each rank trains on its shard through a
DistributedSampler and prints its own samples/s."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--max-steps", type=int, default=40)
args = p.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(4096, 32), torch.randint(0, 4, (4096,)))
loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data), drop_last=True)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(),
                                                                      torch.nn.Linear(256, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
step = 0
t0 = time.perf_counter()
for epoch in range(1000):
    loader.sampler.set_epoch(epoch)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 10 == 0:
            print("rank %s step %d %.1f samples/s" % (os.environ.get("RANK"), step, step * args.batch_size / (time.perf_counter() - t0)),
                  flush=True)
        if step >= args.max_steps:
            break
    if step >= args.max_steps:
        break
dist.destroy_process_group()
