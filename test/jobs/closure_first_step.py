"""A job whose first optimizer step never finishes while it is watched: a closure optimizer (LBFGS)
evaluates the loss and its gradient again and again inside one optimizer.step(closure), with no
tolerance to stop it early. No DataLoader: the whole data set goes through every pass. Each pass
prints "closure pass N" so that a test knows the step has begun."""

import torch

torch.manual_seed(0)
torch.set_num_threads(1)
x = torch.randn(4096, 32)
y = torch.sin(x @ torch.randn(32, 1))
model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.Tanh(), torch.nn.Linear(256, 1))
opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=10 ** 7, tolerance_grad=-1.0, tolerance_change=-1.0)
passes = 0


def closure():
    global passes
    passes += 1
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    print("closure pass %d" % passes, flush=True)
    return loss


for step in range(1, 10):
    opt.step(closure)
    print("step %d done" % step, flush=True)
