"""A plain PyTorch job (no brim import) whose evaluation holds far more memory than its training: every
--eval-every optimizer steps it runs a validation loader (gradients off) and keeps each batch's wide
features alive until the pass ends (as a job that gathers outputs for a metric does), --eval-kib KiB a
sample. Its training steps are small at any batch size; its evaluation grows with the batch size, so a
large batch fits in training and goes over a RAM cap only while it evaluates. The pass holds its peak
(every batch kept) --eval-hold-s seconds, as a metric over what it kept takes time; a pass that keeps
more than --hold-over-mib MiB holds it until the job is stopped (at most --hold-max-s), so that a cap
brim reads by polling sees it however busy the machine is: no verdict rests on the sampler's timing.
--eval-only: the job evaluates and never steps its optimizer (no training step at all)."""

import argparse
import time
from typing import List

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=8)
p.add_argument("--max-steps", type=int, default=400)
p.add_argument("--eval-every", type=int, default=2)
p.add_argument("--eval-kib", type=int, default=4096)
p.add_argument("--eval-batches", type=int, default=2)
p.add_argument("--eval-hold-s", type=float, default=0.25)
p.add_argument("--hold-over-mib", type=float, default=0.0)
p.add_argument("--hold-max-s", type=float, default=60.0)
p.add_argument("--eval-only", action="store_true")
args = p.parse_args()

torch.manual_seed(0)
train = TensorDataset(torch.randn(4096, 32), torch.randint(0, 4, (4096,)))
val = TensorDataset(torch.randn(1024, 32), torch.randint(0, 4, (1024,)))
loader = DataLoader(train, batch_size=args.batch_size, shuffle=True, drop_last=True)
val_loader = DataLoader(val, batch_size=args.batch_size, shuffle=False, drop_last=True)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def evaluate(step: int) -> None:
    """A validation pass: each batch's features (--eval-kib KiB a sample) kept until the pass ends."""
    print("step %d: evaluating (%d batches of %d)" % (step, args.eval_batches, args.batch_size), flush=True)
    model.eval()
    kept: List[torch.Tensor] = []
    with torch.no_grad():
        for i, (x, y) in enumerate(val_loader):
            if i >= args.eval_batches:
                break
            wide = torch.ones(x.shape[0], args.eval_kib * 256) * model(x).sum()
            kept.append(wide)
    held_mib = sum(t.numel() * t.element_size() for t in kept) / 2**20
    over = args.hold_over_mib > 0 and held_mib > args.hold_over_mib
    if over:
        print("step %d: holding %.0f MiB until stopped" % (step, held_mib), flush=True)
    time.sleep(args.hold_max_s if over else args.eval_hold_s)
    print("step %d: evaluated, %d values held" % (step, sum(t.numel() for t in kept)), flush=True)
    model.train()


step = 0
if args.eval_only:
    for _ in range(3):
        evaluate(step)
    print("evaluated only, never trained")
while not args.eval_only and step < args.max_steps:
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % args.eval_every == 0:
            evaluate(step)
        if step >= args.max_steps:
            break
print("done after %d steps" % step)
