"""A plain PyTorch training script (no brim import): DataLoader, model, optimizer, a log line with
the throughput it measures itself every --log-every steps."""

import argparse
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--max-steps", type=int, default=60)
p.add_argument("--log-every", type=int, default=5)
p.add_argument("--workers", type=int, default=0)
p.add_argument("--hidden", type=int, default=512)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(2048, 64), torch.randint(0, 10, (2048,)))
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=args.workers, drop_last=True)
model = torch.nn.Sequential(torch.nn.Linear(64, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, args.hidden),
                            torch.nn.ReLU(), torch.nn.Linear(args.hidden, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

step = 0
seen = 0
t_log = time.perf_counter()
done = False
for epoch in range(1000):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        seen += x.shape[0]
        if step % args.log_every == 0:
            now = time.perf_counter()
            print("epoch %d step %d | loss %.4f | %.1f samples/s" % (epoch, step, loss.item(), seen / (now - t_log)), flush=True)
            seen, t_log = 0, now
        if step >= args.max_steps:
            done = True
            break
    if done:
        break
print("done after %d steps" % step)
