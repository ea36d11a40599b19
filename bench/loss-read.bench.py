#!/usr/bin/env python3
"""What reading the loss with no code change costs a step: the attach with its loss read (the
default) against the attach with it turned off (BRIM_LOSS=0), in fresh processes, interleaved rounds,
a local socket standing in for brim. Two loops: a tiny one (a 1-parameter backward and SGD step: the
read's cost stands bare, the worst case) and a small MLP (512-wide, batch 64, Adam: a real if small
step). Beside them, the read alone in this process (best of 7 repeats), which the machine's load can
only inflate, and the tiny loop with the read switched on and off in alternating blocks inside one
attached process. On the CPU the loss is read when the step goes out (the value exists once backward() returns);
on a GPU it would be one non-blocking copy and an event a step, which this CPU bench cannot measure.

Usage: python bench/loss-read.bench.py [--rounds 7] [--out bench/results/loss-read.json]
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

from standin import REPO, attached_env, scratch_dir, standin_channel  # bench/standin.py, beside this file

TINY = """
import time, torch
torch.set_num_threads(1)
p = torch.nn.Parameter(torch.zeros(1))
opt = torch.optim.SGD([p], lr=0.01)
def step():
    opt.zero_grad()
    (p * 2).sum().backward()
    opt.step()
for _ in range(200): step()
t = time.perf_counter()
for _ in range(%(steps)d): step()
print((time.perf_counter() - t) / %(steps)d * 1e6)
"""

MLP = """
import time, torch
torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))
def step():
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
for _ in range(20): step()
t = time.perf_counter()
for _ in range(%(steps)d): step()
print((time.perf_counter() - t) / %(steps)d * 1e6)
"""

# The tiny loop in one attached process, the read switched on and off in alternating blocks: no
# process-to-process spread (start-up, memory layout), the same warm caches for both sides.
ALTERNATING = """
import json, statistics, time, torch
from brim import _loss
torch.set_num_threads(1)
p = torch.nn.Parameter(torch.zeros(1))
opt = torch.optim.SGD([p], lr=0.01)
def step():
    opt.zero_grad()
    (p * 2).sum().backward()
    opt.step()
for _ in range(500): step()
res = {"loss_read": [], "loss_off": []}
for i in range(%(blocks)d):
    for kind in (("loss_read", "loss_off") if i %% 2 == 0 else ("loss_off", "loss_read")):
        _loss.ENABLED = kind == "loss_read"
        t = time.perf_counter()
        for _ in range(2000): step()
        res[kind].append(round((time.perf_counter() - t) / 2000 * 1e6, 2))
print(json.dumps(res))
"""

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--tiny-steps", type=int, default=5000)
ap.add_argument("--mlp-steps", type=int, default=400)
ap.add_argument("--out", default=os.path.join(REPO, "bench", "results", "loss-read.json"))
args = ap.parse_args()

tmp = scratch_dir()
path = standin_channel(tmp)
loops = {"tiny": (TINY, args.tiny_steps), "mlp": (MLP, args.mlp_steps)}
scripts = {}
for name, (text, steps) in loops.items():
    scripts[name] = os.path.join(tmp, name + ".py")
    with open(scripts[name], "w") as f:
        f.write(text % {"steps": steps})
runs = {name: {"loss_read": [], "loss_off": []} for name in loops}
for r in range(args.rounds):
    for name, script in scripts.items():
        order = ("loss_read", "loss_off") if r % 2 == 0 else ("loss_off", "loss_read")  # ABBA: no side always first
        for kind in order:
            env = attached_env(path)
            if kind == "loss_off":
                env["BRIM_LOSS"] = "0"
            out = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, check=True)
            runs[name][kind].append(round(float(out.stdout.strip()), 2))

alternating = os.path.join(tmp, "alternating.py")
with open(alternating, "w") as f:
    f.write(ALTERNATING % {"blocks": 30})
blocks = json.loads(subprocess.run([sys.executable, alternating], env=attached_env(path), capture_output=True, text=True, check=True).stdout)

import timeit  # noqa: E402
import torch  # noqa: E402

# The read alone, in this process: what the attach does with a step's loss on the CPU (keep it as it
# goes backward, take it at the step's end, read its value as the step goes out), the best of 7
# repeats: a figure the machine's load can only make larger.
sys.path.insert(0, os.path.join(REPO, "python"))
from brim import _loss  # noqa: E402

_loss.ENABLED = True
loss_tensor = torch.ones((), requires_grad=True) * 2


def one_read():
    _loss.seen(loss_tensor)
    _loss.take().value()


per_call_us = min(timeit.repeat(one_read, number=20000, repeat=7)) / 20000 * 1e6

report = {
    "command": "%s bench/loss-read.bench.py %s" % (os.path.relpath(sys.executable, REPO) if sys.executable.startswith(REPO) else sys.executable,
                                                   " ".join(sys.argv[1:])),
    "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                "torch": torch.__version__, "gpu": "none (CPU)"},
    "rounds": args.rounds,
    "read_alone_us_per_step": round(per_call_us, 3),
    "tiny_alternating_in_process": {
        "blocks_of_2000_steps": blocks,
        "median_loss_read_us": statistics.median(blocks["loss_read"]),
        "median_loss_off_us": statistics.median(blocks["loss_off"]),
        "loss_read_cost_us_per_step": round(statistics.median(blocks["loss_read"]) - statistics.median(blocks["loss_off"]), 2),
    },
    "loops": {},
}
for name, (text, steps) in loops.items():
    on, off = statistics.median(runs[name]["loss_read"]), statistics.median(runs[name]["loss_off"])
    # paired by round: the spread of the per-round ratio says what is noise
    ratios = sorted(a / b for a, b in zip(runs[name]["loss_off"], runs[name]["loss_read"]))
    report["loops"][name] = {
        "steps": steps,
        "us_per_step": runs[name],
        "median_loss_read_us": on,
        "median_loss_off_us": off,
        "loss_read_cost_us_per_step": round(on - off, 2),
        "throughput_ratio": round(off / on, 4),
        "throughput_ratio_per_round": [round(x, 4) for x in ratios],
    }
    print("%s loop: %.1f us/step with the loss read, %.1f without: %+.1f us a step, throughput ratio %.3f (per round %.3f to %.3f)"
          % (name, on, off, on - off, off / on, ratios[0], ratios[-1]))
print("the read alone (seen + take + value, in process, best of 7): %.2f us a step" % per_call_us)
print("tiny loop, read on/off in alternating blocks in one process: %.1f vs %.1f us/step (%+.1f us)" % (
    report["tiny_alternating_in_process"]["median_loss_read_us"], report["tiny_alternating_in_process"]["median_loss_off_us"],
    report["tiny_alternating_in_process"]["loss_read_cost_us_per_step"]))
with open(args.out, "w") as f:
    f.write(json.dumps(report, indent=2) + "\n")
