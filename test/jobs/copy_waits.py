"""A small regression loop that reads its batch size from `--config conf.yaml` and, at any other
batch size than the config's own 16 (a measuring or trial run on a config copy), waits instead of
training: something to kill brim in the middle of, while the copy exists."""
import sys
import time

import torch
import yaml

with open(sys.argv[sys.argv.index("--config") + 1]) as f:
    batch_size = int(yaml.safe_load(f)["batch_size"])
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.utils.data.TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
loader = torch.utils.data.DataLoader(data, batch_size=batch_size)
for epoch in range(100):
    for x, y in loader:
        if batch_size != 16:
            print("copy in use: waiting", flush=True)
            time.sleep(600)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
