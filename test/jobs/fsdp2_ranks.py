"""FSDP2 (fully_shard on a CPU device mesh, gloo) under torchrun: each rank trains on its own batches
and prints its own samples/s every 10 steps."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--max-steps", type=int, default=1000)
args = p.parse_args()

dist.init_process_group("gloo")
torch.manual_seed(0)
torch.set_num_threads(1)
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
for layer in model:
    if isinstance(layer, torch.nn.Linear):
        fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = TensorDataset(torch.randn(65536, 32), torch.randint(0, 4, (65536,)))
loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data), drop_last=True)
t0 = time.perf_counter()
for step, (x, y) in enumerate(loader):
    if step >= args.max_steps:
        break
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    if (step + 1) % 10 == 0:
        print("rank %s step %d %.1f samples/s" % (os.environ.get("RANK"), step + 1,
                                                  (step + 1) * args.batch_size / (time.perf_counter() - t0)), flush=True)
dist.destroy_process_group()
