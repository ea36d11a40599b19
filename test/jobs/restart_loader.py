"""A trainer that pulls batches with next() and re-creates its loader's iterator when it runs out
(catching StopIteration), for a number of optimizer steps, not epochs."""

import argparse
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--max-steps", type=int, default=60)
p.add_argument("--log-every", type=int, default=5)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(args.batch_size * 3, 64), torch.randn(args.batch_size * 3, 1))  # 3 batches per pass
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

it = iter(loader)
seen = 0
restarts = 0
t_log = time.perf_counter()
for step in range(1, args.max_steps + 1):
    try:
        x, y = next(it)
    except StopIteration:
        restarts += 1
        it = iter(loader)
        x, y = next(it)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    seen += x.shape[0]
    if step % args.log_every == 0:
        now = time.perf_counter()
        print("step %d (loader restarts %d) loss %.4f %.1f samples/s" % (step, restarts, loss.item(), seen / (now - t_log)), flush=True)
        seen, t_log = 0, now
