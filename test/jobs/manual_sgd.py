"""Hand-written SGD with no DataLoader and no optimizer, the way pytorch/examples'
word_language_model trains: batches sliced from one tensor, parameters updated by hand, an
`ms/batch` log line."""

import argparse
import math
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--max-steps", type=int, default=60)
p.add_argument("--log-interval", type=int, default=5)
p.add_argument("--lr", type=float, default=0.002)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
n = args.batch_size * 40
x_all = torch.randn(n, 128)
y_all = x_all @ torch.randn(128, 1) + 0.1 * torch.randn(n, 1)
model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.Tanh(), torch.nn.Linear(512, 512), torch.nn.Tanh(),
                            torch.nn.Linear(512, 1))
batches = n // args.batch_size

step = 0
total_loss = 0.0
start = time.time()
for epoch in range(1, 1000):
    for batch, i in enumerate(range(0, n - args.batch_size + 1, args.batch_size)):
        data, target = x_all[i:i + args.batch_size], y_all[i:i + args.batch_size]
        model.zero_grad()
        loss = torch.nn.functional.mse_loss(model(data), target)
        loss.backward()
        for param in model.parameters():
            param.data.add_(param.grad, alpha=-args.lr)
        total_loss += loss.item()
        step += 1
        if step % args.log_interval == 0:
            elapsed = time.time() - start
            cur = total_loss / args.log_interval
            print("| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | loss {:5.2f} | ppl {:8.2f}".format(
                epoch, batch + 1, batches, args.lr, elapsed * 1000 / args.log_interval, cur, math.exp(min(cur, 50))), flush=True)
            total_loss = 0.0
            start = time.time()
        if step >= args.max_steps:
            break
    if step >= args.max_steps:
        break
