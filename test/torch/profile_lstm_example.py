"""Profiles the lstm-transformer example's LSTM (examples/lstm-transformer/lstm.yaml) with the SDK
(brim.torch.profile) on CPU, as its training loop feeds it, and writes the profile to argv[1]."""
import os
import sys

import torch
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "lstm-transformer"))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import brim.torch as bt  # noqa: E402
from train import build  # noqa: E402

with open(os.path.join(ROOT, "examples", "lstm-transformer", "lstm.yaml")) as f:
    spec = yaml.safe_load(f)
torch.manual_seed(0)
model = build(spec)
batch = (torch.randn(16, spec["seq_len"], spec["input"]), torch.randn(16, spec["output"]))
bt.profile(model, batch, lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1]), path=sys.argv[1], name="lstm-forecaster",
           precisions=("fp32",))
