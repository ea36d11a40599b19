"""A job whose progress bar redraws one line with carriage returns and never ends it, as tqdm or Keras
do between epochs: brim's step budget stops it mid-line. --stream says where the bar goes (Keras
draws on stdout, tqdm on stderr); --step-s is the time each step sleeps."""

import argparse
import sys
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--stream", choices=("stdout", "stderr"), default="stderr")
p.add_argument("--step-s", type=float, default=0.0)
args = p.parse_args()
out = sys.stdout if args.stream == "stdout" else sys.stderr

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(1, 100000):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    out.write("\rstep %d/99999" % i)
    out.flush()
    time.sleep(args.step_s)
