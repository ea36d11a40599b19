"""A plain PyTorch loop whose DataLoader takes its workers from a variable (no literal on the line, no
flag, no config key): brim tune varies them, and the DataLoader's other settings, through the attach
(BRIM_LOADER_ARGS), without editing the file. Each sample waits 4 ms, as a read from slow storage would:
the loop waits for data with the CPUs idle, so more workers than cores pay."""

import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowFiles(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.randn(16)


torch.manual_seed(0)
torch.set_num_threads(1)
workers = 1
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
loader = DataLoader(SlowFiles(), batch_size=16, shuffle=True, num_workers=workers)

for epoch in range(1000):
    for x in loader:
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
