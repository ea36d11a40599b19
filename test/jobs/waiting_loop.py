"""A plain PyTorch training script (no brim import) whose every step also waits --sleep-ms: a step
costs about the same at any batch size, so a larger batch is faster per sample by construction (a
tune's candidate beats the baseline clearly, whatever else runs on the machine). The update is plain
SGD by hand: no torch.optim, whose first optimizer imports torch._dynamo (about 2 s of CPU a run)."""

import argparse
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--max-steps", type=int, default=60)
p.add_argument("--sleep-ms", type=float, default=30.0)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(2048, 64), torch.randint(0, 10, (2048,)))
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))

step = 0
while step < args.max_steps:
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= 0.01 * param.grad
        time.sleep(args.sleep_ms / 1000)
        step += 1
        if step >= args.max_steps:
            break
print("done after %d steps" % step)
