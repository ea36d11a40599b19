"""A job whose batches do not say their samples (each item of its data set is a packed batch of 8
sequences with a lengths vector of another size beside it: no batch dimension to tell; the
DataLoader batches nothing), which prints its own rate: "update N | S samples/s", its 8 sequences a
step counted by itself. The attach counts its optimizer steps, never their samples; `--load-ms`
makes each batch slow to read, so that loader workers matter."""

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--num-workers", type=int, default=0)
p.add_argument("--steps", type=int, default=400)
p.add_argument("--load-ms", type=float, default=0.0)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)
SEQUENCES = 8


class Packed(Dataset):
    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int):
        if args.load_ms > 0:
            time.sleep(args.load_ms / 1000)
        g = torch.Generator().manual_seed(i)
        return torch.randn(SEQUENCES, 12, 16, generator=g), torch.randint(1, 12, (5,), generator=g)


model = torch.nn.GRU(16, 64, batch_first=True)
head = torch.nn.Linear(64, 1)
opt = torch.optim.SGD(list(model.parameters()) + list(head.parameters()), lr=0.01)
loader = DataLoader(Packed(), batch_size=None, num_workers=args.num_workers)
t0 = time.perf_counter()
for step, (x, lengths) in enumerate(loader):
    out, _ = model(x)
    loss = head(out[:, -1]).pow(2).mean() + 0 * lengths.float().sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 9:
        print("update %d | loss %.3f | %.1f samples/s" % (step + 1, float(loss), 10 * SEQUENCES / (time.perf_counter() - t0)), flush=True)
        t0 = time.perf_counter()
    if step + 1 >= args.steps:
        break
