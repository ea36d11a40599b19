"""A job that prints a tqdm-like bar before it trains: it builds its model, then "prepares" its data
items one by one (a tokenizer, litdata's optimize, as litgpt does after building its model),
drawing `Preparing: n/N [..., it/s]` with \\r updates, builds its optimizer, then trains with a bar
of its own per step. Under brim the attach counts the optimizer's steps; neither bar is a training
step brim may count."""

import argparse
import sys
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--items", type=int, default=40)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--batch-size", type=int, default=16)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)


def bar(label: str, n: int, total: int, t0: float) -> None:
    rate = n / max(time.perf_counter() - t0, 1e-6)
    pct = 100 * n // total
    sys.stderr.write("\r%s: %3d%%|%-10s| %d/%d [00:00<00:00, %.2fit/s]" % (label, pct, "#" * (pct // 10), n, total, rate))
    sys.stderr.flush()


model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
t0 = time.perf_counter()
data = []
for i in range(args.items):
    data.append(torch.randn(args.batch_size, 8))
    time.sleep(0.005)
    bar("Preparing", i + 1, args.items, t0)
sys.stderr.write("\n")
print("prepared %d items" % args.items, flush=True)

opt = torch.optim.SGD(model.parameters(), lr=0.01)
t0 = time.perf_counter()
for step in range(args.steps):
    x = data[step % len(data)]
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    bar("Training", step + 1, args.steps, t0)
sys.stderr.write("\n")
print("trained %d steps" % args.steps, flush=True)
