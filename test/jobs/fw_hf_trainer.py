"""The real Hugging Face Trainer, offline: a tiny GPT-2 built from a config (no hub), generated
token sequences, gradient accumulation."""

import argparse
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from fw_meter import Meter

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=8)
p.add_argument("--accumulate", type=int, default=2)
p.add_argument("--max-steps", type=int, default=1000)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n=2048, length=32):
        self.ids = torch.randint(0, 256, (n, length))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Rate(TrainerCallback):
    def __init__(self):
        self.meter = Meter(args.batch_size * args.accumulate)

    def on_step_end(self, targs, state, control, **kwargs):
        self.meter.step()


model = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=32, n_embd=64, n_layer=2, n_head=2))
with tempfile.TemporaryDirectory() as out:
    targs = TrainingArguments(output_dir=out, max_steps=args.max_steps, per_device_train_batch_size=args.batch_size,
                              gradient_accumulation_steps=args.accumulate, learning_rate=1e-3, use_cpu=True,
                              report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
                              dataloader_num_workers=0)
    Trainer(model=model, args=targs, train_dataset=Tokens(), callbacks=[Rate()]).train()
