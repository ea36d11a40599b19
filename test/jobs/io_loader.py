"""A training script whose loader is I/O-bound: each sample is a small .npy file read from disk,
behind a fixed per-file latency standing for a network or spinning disk (--latency-ms). With
--num-workers 0 the loop waits for data almost all the time while the CPUs idle; workers beyond the
core count keep more reads in flight (no brim import).

    python io_loader.py --batch-size 16 --num-workers 0
"""

import argparse
import os
import tempfile
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--num-workers", type=int, default=0)
p.add_argument("--files", type=int, default=256)
p.add_argument("--latency-ms", type=float, default=3.0)
p.add_argument("--max-steps", type=int, default=100000)
args = p.parse_args()

root = tempfile.mkdtemp(prefix="io-loader-")
for i in range(args.files):
    np.save(os.path.join(root, "%05d.npy" % i), np.random.default_rng(i).standard_normal(64).astype(np.float32))


class Files(Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        time.sleep(args.latency_ms / 1000.0)
        x = np.load(os.path.join(root, "%05d.npy" % (i % args.files)))
        return torch.from_numpy(x), int(i % 4)


torch.set_num_threads(1)
loader = DataLoader(Files(), batch_size=args.batch_size, shuffle=False, num_workers=args.num_workers)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, y) in enumerate(loader):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step + 1 >= args.max_steps:
        break
