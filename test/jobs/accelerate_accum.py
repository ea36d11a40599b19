"""An accelerate training script with gradient accumulation, as its README would have it: the
micro-batch and the accumulation are command-line flags (no brim import).

    python accelerate_accum.py --batch-size 16 --gradient_accumulation_steps 4
"""

import argparse

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--gradient_accumulation_steps", type=int, default=4)
p.add_argument("--max-steps", type=int, default=100000)
p.add_argument("--samples", type=int, default=16384)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps, cpu=True)
data = TensorDataset(torch.randn(args.samples, 32), torch.randint(0, 4, (args.samples,)))
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True)
model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
model, opt, loader = accelerator.prepare(model, opt, loader)

updates = 0
while updates < args.max_steps:
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
        if accelerator.sync_gradients:
            updates += 1
            if updates % 50 == 0:
                accelerator.print("update %d loss %.4f" % (updates, loss.item()))
            if updates >= args.max_steps:
                break
