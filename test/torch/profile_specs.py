"""Profiles PyTorch builds of brim specs with the SDK (brim.torch.profile) on CPU.

argv: output directory. stdin: JSON list of MLP-like specs. Writes profile-<i>.json per spec.
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

import brim.torch as bt  # noqa: E402
from build_model import build  # noqa: E402

torch.manual_seed(0)
out = sys.argv[1]
for i, spec in enumerate(json.load(sys.stdin)):
    model = build(spec)
    batch = (torch.randn(16, spec["input"]), torch.randn(16, spec["output"]))
    bt.profile(model, batch, lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1]), path=os.path.join(out, f"profile-{i}.json"),
               name=f"spec{i}", precisions=("fp32",))
