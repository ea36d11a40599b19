"""A training loop with a tqdm progress bar whose postfix shows the samples/s the job measures.
Without tqdm installed it draws the same bar itself (\\r updates, tqdm's format)."""

import argparse
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

try:
    from tqdm import tqdm
except ImportError:
    class tqdm:  # noqa: N801  (tqdm's name) - the few parts used here, in tqdm's output format
        def __init__(self, iterable, total=None, desc=""):
            self.iterable, self.total, self.desc, self.n = iterable, total, desc, 0
            self.start = time.perf_counter()
            self.postfix = ""

        def __iter__(self):
            for item in self.iterable:
                yield item
                self.n += 1
                self._draw()
            sys.stderr.write("\n")

        def set_postfix(self, **kw):
            self.postfix = ", ".join("%s=%s" % kv for kv in kw.items())

        def _draw(self):
            el = time.perf_counter() - self.start
            rate = self.n / el if el > 0 else 0.0
            pct = 100 * self.n // self.total
            bar = "#" * (pct // 10)
            sys.stderr.write("\r%s: %3d%%|%-10s| %d/%d [%02d:%02d<00:00, %.2fit/s%s]" % (
                self.desc, pct, bar, self.n, self.total, el // 60, el % 60, rate, ", " + self.postfix if self.postfix else ""))
            sys.stderr.flush()

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--max-steps", type=int, default=60)
p.add_argument("--log-every", type=int, default=5)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(1024, 1, 16, 16), torch.randint(0, 10, (1024,)))
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True)
model = torch.nn.Sequential(torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 3, padding=1),
                            torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(32 * 16 * 16, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

step = 0
seen = 0
t_log = time.perf_counter()
for epoch in range(1000):
    bar = tqdm(loader, total=len(loader), desc="Epoch %d" % epoch)
    for x, y in bar:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        seen += x.shape[0]
        if step % args.log_every == 0:
            now = time.perf_counter()
            bar.set_postfix(loss="%.3f" % loss.item(), samples_per_s="%.1f" % (seen / (now - t_log)))
            print("step %d samples/s %.1f" % (step, seen / (now - t_log)), flush=True)
            seen, t_log = 0, now
        if step >= args.max_steps:
            break
    if step >= args.max_steps:
        break
