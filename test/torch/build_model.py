"""Builds the PyTorch module a brim model spec describes (docs/model-spec.md) and counts its parameters.

Reads a JSON list of specs on stdin, prints a JSON list of {"total": n, "trainable": n}. This is the
reference the planner's counts are checked against: it is written from the spec document with
torch.nn modules, independently of the TypeScript code.
"""
import json
import sys

import torch
from torch import nn

ACT = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "silu": nn.SiLU, "sigmoid": nn.Sigmoid}


def mlp(inp, hidden, out, act="relu", norm=False, dropout=0.0):
    layers, prev = [], inp
    for h in hidden:
        layers.append(nn.Linear(prev, h))
        if norm:
            layers.append(nn.LayerNorm(h))
        layers.append(ACT[act]())
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
        prev = h
    layers.append(nn.Linear(prev, out))
    return nn.Sequential(*layers)


class NBeatsBlock(nn.Module):
    def __init__(self, s, stack):
        super().__init__()
        back, fore, units = s["lookback"] * s.get("features", 1), s["horizon"] * s.get("features", 1), s["units"]
        fc, prev = [], back
        for _ in range(s.get("layers_per_block", 4)):
            fc += [nn.Linear(prev, units), nn.ReLU()]
            prev = units
        self.fc = nn.Sequential(*fc)
        f = s.get("features", 1)
        if stack["type"] == "generic":
            self.theta = nn.Linear(units, 2 * stack["theta"])
            self.backcast = nn.Linear(stack["theta"], back, bias=False)
            self.forecast = nn.Linear(stack["theta"], fore, bias=False)
        else:
            coeff = stack["degree"] + 1 if stack["type"] == "trend" else 2 * stack["harmonics"]
            self.theta = nn.Linear(units, 2 * coeff * f)
            self.register_buffer("basis", torch.zeros(coeff, back + fore))


def nbeats(s):
    blocks = nn.ModuleList()
    for stack in s["stacks"]:
        if s.get("share_weights_in_stack", False):
            shared = NBeatsBlock(s, stack)
            blocks.extend([shared] * stack["blocks"])
        else:
            blocks.extend(NBeatsBlock(s, stack) for _ in range(stack["blocks"]))
    return blocks


def recurrent(s):
    cls = nn.LSTM if s["family"] == "lstm" else nn.GRU
    dirs = 2 if s.get("bidirectional", False) else 1
    return nn.ModuleList([cls(s["input"], s["hidden"], s.get("layers", 1), batch_first=True, bidirectional=s.get("bidirectional", False)),
                          nn.Linear(s["hidden"] * dirs, s["output"])])


def cnn_lstm(s):
    mods, prev = [], s["input"]
    for c in s["conv"]:
        mods.append(nn.Conv1d(prev, c["out"], c["kernel"], c.get("stride", 1), padding=c["kernel"] // 2))
        if s.get("batchnorm", True):
            mods.append(nn.BatchNorm1d(c["out"]))
        mods.append(nn.ReLU())
        if s.get("pool", 1) > 1:
            mods.append(nn.MaxPool1d(s["pool"]))
        prev = c["out"]
    l = s["lstm"]
    dirs = 2 if l.get("bidirectional", False) else 1
    return nn.ModuleList([nn.Sequential(*mods), nn.LSTM(prev, l["hidden"], l.get("layers", 1), batch_first=True, bidirectional=l.get("bidirectional", False)),
                          nn.Linear(l["hidden"] * dirs, s["output"])])


class LoRALinear(nn.Module):
    def __init__(self, inp, out, rank):
        super().__init__()
        self.base = nn.Linear(inp, out)
        self.base.requires_grad_(False)
        self.lora_A = nn.Linear(inp, rank, bias=False)
        self.lora_B = nn.Linear(rank, out, bias=False)


class Block(nn.Module):
    def __init__(self, s, index):
        super().__init__()
        d, lora = s["d_model"], s.get("lora")
        targets = set(lora["targets"]) if lora else set()

        def proj(name, i, o):
            if lora and name in targets:
                return LoRALinear(i, o, lora["rank"])
            lin = nn.Linear(i, o)
            if lora:
                lin.requires_grad_(False)
            return lin

        self.q, self.k, self.v, self.o = (proj(n, d, d) for n in ("q", "k", "v", "o"))
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        if lora:
            self.norm1.requires_grad_(False)
            self.norm2.requires_grad_(False)
        moe = s.get("moe")
        if moe and index in moe["layers"]:
            self.router = nn.Linear(d, moe["experts"], bias=False)
            self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, moe["ffn"]), ACT[s.get("activation", "gelu")](), nn.Linear(moe["ffn"], d)) for _ in range(moe["experts"]))
        else:
            self.ffn_in, self.ffn_out = proj("ffn_in", d, s["ffn"]), proj("ffn_out", s["ffn"], d)


def transformer(s):
    d = s["d_model"]
    mods = nn.ModuleDict()
    mods["tokens"] = nn.Embedding(s["vocab"], d) if "vocab" in s else nn.Linear(s["input"], d)
    mods["positions"] = nn.Embedding(s["max_positions"], d)
    if s.get("lora"):
        mods["tokens"].requires_grad_(False)
        mods["positions"].requires_grad_(False)
    mods["layers"] = nn.ModuleList(Block(s, i) for i in range(s["layers"]))
    if s.get("final_norm", True):
        mods["final_norm"] = nn.LayerNorm(d)
        if s.get("lora"):
            mods["final_norm"].requires_grad_(False)
    if s.get("output", 0) > 0:
        mods["head"] = nn.Linear(d, s["output"])
    return mods


def actor_critic(s):
    mods = nn.ModuleDict({
        "policy": mlp(s["observation"], s["policy"], s["actions"], s.get("activation", "tanh")),
        "value": mlp(s["observation"], s["value"], 1, s.get("activation", "tanh")),
    })
    if s.get("continuous", True):
        mods.register_parameter("log_std", nn.Parameter(torch.zeros(s["actions"])))
    return mods


def build(s):
    f = s["family"]
    if f == "mlp":
        return mlp(s["input"], s["hidden"], s["output"], s.get("activation", "relu"), s.get("norm", "none") == "layernorm", s.get("dropout", 0.0))
    if f == "nbeats":
        return nbeats(s)
    if f in ("lstm", "gru"):
        return recurrent(s)
    if f == "cnn1d-lstm":
        return cnn_lstm(s)
    if f == "transformer-encoder":
        return transformer(s)
    if f == "actor-critic":
        return actor_critic(s)
    raise ValueError(f"unknown family {f}")


def counts(module):
    params = {id(p): p for p in module.parameters()}.values()
    return {"total": sum(p.numel() for p in params), "trainable": sum(p.numel() for p in params if p.requires_grad)}


if __name__ == "__main__":
    specs = json.load(sys.stdin)
    print(json.dumps([counts(build(s)) for s in specs]))
