"""A job that derives its accumulation from a token budget, as nanoGPT-style trainers do: each
optimizer step sees `--total-batch-size` tokens, `-B` sequences of `-T` tokens per micro-step, and
grad_accum = total // (B * T) after `assert total % (B * T) == 0`. A micro-batch that does not
divide the budget ends the job with that assertion. Prints its tokens/s."""

import argparse
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--total-batch-size", type=int, default=4096)
p.add_argument("-B", type=int, default=4)
p.add_argument("-T", type=int, default=64)
p.add_argument("--steps", type=int, default=200)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)

B, T = args.B, args.T
assert args.total_batch_size % (B * T) == 0, "make sure total_batch_size is divisible by B * T"
grad_accum = args.total_batch_size // (B * T)
print("total batch %d tokens: %d micro-steps of %d x %d" % (args.total_batch_size, grad_accum, B, T), flush=True)

vocab = 97
model = torch.nn.Sequential(torch.nn.Embedding(vocab, 32), torch.nn.Linear(32, vocab))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.randint(0, vocab, (64 * T + 1,))
t0 = time.perf_counter()
for step in range(args.steps):
    opt.zero_grad()
    for _ in range(grad_accum):
        i = torch.randint(0, len(data) - T - 1, (B,))
        x = torch.stack([data[j:j + T] for j in i])
        y = torch.stack([data[j + 1:j + T + 1] for j in i])
        loss = torch.nn.functional.cross_entropy(model(x).view(-1, vocab), y.view(-1)) / grad_accum
        loss.backward()
    opt.step()
    if (step + 1) % 10 == 0:
        print("step %d tokens/s %.0f" % (step + 1, (step + 1) * args.total_batch_size / (time.perf_counter() - t0)), flush=True)
