"""A slow PyTorch loop that takes its micro-batch from the YAML config named by --config, and says it
has started by writing the file named in $SLOW_JOB_STARTED (the config it read, on one line): a
measuring run that a test can kill mid-measure."""

import os
import re
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

config = sys.argv[sys.argv.index("--config") + 1]
with open(config) as f:
    batch = int(re.search(r"batch_size:\s*(\d+)", f.read()).group(1))
torch.set_num_threads(1)
loader = DataLoader(TensorDataset(torch.randn(4096, 8), torch.randn(4096, 1)), batch_size=batch)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
marker = os.environ.get("SLOW_JOB_STARTED")
if marker:
    with open(marker, "w") as f:
        f.write(config + "\n")
for epoch in range(1000):
    for x, y in loader:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(1.0)
