"""DistributedDataParallel under torchrun (gloo on CPU): each rank trains on its shard through a
DistributedSampler and prints its own samples/s."""

import argparse
import os

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from fw_meter import Meter

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--max-steps", type=int, default=1000)
args = p.parse_args()

dist.init_process_group("gloo")
torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(8192, 32), torch.randint(0, 4, (8192,)))
loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data), drop_last=True)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(),
                                                                      torch.nn.Linear(128, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
meter = Meter(args.batch_size, label=" rank %s" % os.environ.get("RANK"))
steps = 0
for epoch in range(1000):
    loader.sampler.set_epoch(epoch)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        meter.step()
        if steps >= args.max_steps:
            break
    if steps >= args.max_steps:
        break
dist.destroy_process_group()
