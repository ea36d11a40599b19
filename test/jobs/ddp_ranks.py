"""A DistributedDataParallel job for torchrun (gloo on CPU) whose ranks can misbehave:
--slow-rank R --slow-ms M makes rank R compute M ms longer each step (a straggler);
--stall-rank R --stall-at K makes rank R sleep before step K's gradient all-reduce, so that every
other rank waits in the collective (a hang)."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--max-steps", type=int, default=40)
p.add_argument("--slow-rank", type=int, default=-1)
p.add_argument("--slow-ms", type=float, default=0.0)
p.add_argument("--stall-rank", type=int, default=-1)
p.add_argument("--stall-at", type=int, default=-1)
args = p.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(4096, 32), torch.randint(0, 4, (4096,)))
loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data), drop_last=True)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                                                      torch.nn.Linear(64, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
step = 0
for epoch in range(1000):
    loader.sampler.set_epoch(epoch)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if rank == args.slow_rank:
            time.sleep(args.slow_ms / 1000)
        if rank == args.stall_rank and step == args.stall_at:
            print("rank %d sleeps before the all-reduce of step %d" % (rank, step), flush=True)
            time.sleep(3600)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 10 == 0:
            print("rank %s step %d" % (os.environ.get("RANK"), step), flush=True)
        if step >= args.max_steps:
            break
    if step >= args.max_steps:
        break
dist.destroy_process_group()
