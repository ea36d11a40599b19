"""A full-batch job with a closure optimizer: LBFGS evaluates the loss and its gradient several times
inside each optimizer.step(closure), on the whole data set every time; there is no batch size to
choose and no loader."""

import argparse

import torch

p = argparse.ArgumentParser()
p.add_argument("--log-every", type=int, default=50)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
x = torch.randn(2048, 8)
y = torch.sin(x @ torch.randn(8, 1))
model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5, history_size=10)


def closure():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for step in range(1, 10 ** 6):
    loss = opt.step(closure)
    if step % args.log_every == 0:
        print("step %d loss %.5f" % (step, float(loss)), flush=True)
