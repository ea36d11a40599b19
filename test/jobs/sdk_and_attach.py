"""A job that uses the SDK (brim.track) and a plain optimizer: brim sees each step twice (attach and
SDK) and must count it once. Prints the SDK's own step count at the end."""

import time

import torch
from torch.utils.data import DataLoader, TensorDataset

import brim

torch.manual_seed(0)
torch.set_num_threads(1)
loader = DataLoader(TensorDataset(torch.randn(512, 16), torch.randn(512, 1)), batch_size=32, shuffle=True)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(100):
    for x, y in brim.track(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.002)
    if brim.should_stop():
        break
print("sdk steps=%d" % brim.steps())
