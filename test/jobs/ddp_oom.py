"""A DistributedDataParallel job for torchrun (gloo on CPU) that reads its micro-batch and
accumulation from brim's knobs and "runs out of memory" on rank --oom-rank at step --oom-at while the
micro-batch is above --fits (torch.OutOfMemoryError, as a GPU would raise it). Each rank prints the
micro-batch and accumulation it runs with and the round (TORCHELASTIC_RESTART_COUNT)."""

import argparse
import os

import brim
import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--max-steps", type=int, default=12)
p.add_argument("--oom-rank", type=int, default=1)
p.add_argument("--oom-at", type=int, default=3)
p.add_argument("--fits", type=int, default=16)
args = p.parse_args()

micro = brim.knob("batch_size", 32)
accumulation = brim.knob("accumulation", 1)
dist.init_process_group("gloo")
rank = dist.get_rank()
round_ = os.environ.get("TORCHELASTIC_RESTART_COUNT")
print("rank %d round %s micro-batch %d accumulation %d" % (rank, round_, micro, accumulation), flush=True)
torch.manual_seed(rank)
torch.set_num_threads(1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                                                      torch.nn.Linear(64, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(args.max_steps):
    for i in range(accumulation):
        if rank == args.oom_rank and step == args.oom_at and micro > args.fits:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (a stand-in: micro-batch %d)"
                                         % micro)
        x, y = torch.randn(micro, 32), torch.randint(0, 4, (micro,))
        if i < accumulation - 1:
            with model.no_sync():
                torch.nn.functional.cross_entropy(model(x), y).backward()
        else:
            torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
print("rank %d done: %d steps of %d x %d" % (rank, args.max_steps, micro, accumulation), flush=True)
