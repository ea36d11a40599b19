"""A job whose DataLoader workers come from a flag brim does not know: `-j/--threads` (argparse
dest `threads`), passed as `num_workers=args.threads`. Each item is slow to read (`--load-ms`), so
workers matter. Prints its own samples/s."""

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("-j", "--threads", type=int, default=0, help="data loading processes")
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--load-ms", type=float, default=2.0)
p.add_argument("--steps", type=int, default=300)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)


class Slow(Dataset):
    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int):
        time.sleep(args.load_ms / 1000)
        return torch.randn(8), torch.randn(1)


loader = DataLoader(
    Slow(),
    batch_size=args.batch_size,
    num_workers=args.threads,
)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
t0 = time.perf_counter()
for step, (x, y) in enumerate(loader):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if (step + 1) % 20 == 0:
        print("step %d samples/s %.1f" % (step + 1, (step + 1) * args.batch_size / (time.perf_counter() - t0)), flush=True)
    if step + 1 >= args.steps:
        break
