"""A job that takes --batch-size on its command line and then overwrites it, as rollout-based scripts
do (the batch is num_envs × num_steps, split into num_minibatches): whatever --batch-size says, every
step trains on the same minibatch of 64 samples, through a DataLoader."""

import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=256)
p.add_argument("--num-envs", type=int, default=4)
p.add_argument("--num-steps", type=int, default=64)
p.add_argument("--num-minibatches", type=int, default=4)
args = p.parse_args()
args.batch_size = args.num_envs * args.num_steps  # the flag's value is never used
minibatch = args.batch_size // args.num_minibatches

torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(4096, 32), torch.randint(0, 4, (4096,)))
model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.Tanh(), torch.nn.Linear(128, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(1000):
    for x, y in DataLoader(data, batch_size=minibatch, shuffle=True, drop_last=True):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
