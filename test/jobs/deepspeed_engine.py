"""A DeepSpeed job as its tutorials write one, for `deepspeed --num_gpus 2 deepspeed_engine.py
--deepspeed_config ds_config.json`: the engine from `deepspeed.initialize` (ZeRO from the config, the
client's AdamW), its own DataLoader, `engine.backward` / `engine.step` every micro-batch. The batch
sizes and accumulation live in the DeepSpeed config, as users keep them. On a CPU host DeepSpeed's CPU
accelerator talks gloo (no oneCCL needed)."""

import argparse
import time

import deepspeed
import torch
from torch.utils.data import TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--local_rank", type=int, default=-1)
p.add_argument("--max-steps", type=int, default=40)
p.add_argument("--step-ms", type=float, default=0.0, help="extra work each micro-batch, in ms")
p = deepspeed.add_config_arguments(p)
args = p.parse_args()

deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
data = TensorDataset(torch.randn(8192, 32), torch.randint(0, 4, (8192,)))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
engine, _, loader, _ = deepspeed.initialize(args=args, model=model, optimizer=opt, training_data=data)
while engine.global_steps < args.max_steps:
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(engine(x), y)
        if args.step_ms > 0:
            time.sleep(args.step_ms / 1000)
        engine.backward(loss)
        engine.step()
        if engine.global_steps >= args.max_steps:
            break
shape = (engine.train_micro_batch_size_per_gpu(), engine.gradient_accumulation_steps())
print("rank %d: %d optimizer steps of %d x %d" % ((torch.distributed.get_rank(), engine.global_steps) + shape), flush=True)
