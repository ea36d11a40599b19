"""A tiny causal LM (Llama built from a config: no hub, no download) trained by the real Hugging Face
Trainer on padded sequences of varying lengths (labels -100 on the padding), with gradient
accumulation, for the token-averaged loss of issue 37. Dropout is 0 and the sampler seeded, so two
runs with micro-batch x accumulation held see the same samples in each optimizer step.

--no-loss-kwargs makes the model say it takes no loss kwargs (as a custom model without **kwargs
does): the Trainer then does not pass num_items_in_batch, each micro-batch's loss is its own token
mean, and a changed accumulation changes the loss. By default (transformers >= 4.46) the Trainer
passes it and the loss is over the whole step's tokens. --sleep-ms waits that long for each
micro-batch, so fewer, larger micro-batches are clearly faster on any machine. --log-losses logs
every step and prints the loss the Trainer logged for each as a line "LOSS <value>"."""

import argparse
import json
import tempfile
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=4)
p.add_argument("--accumulation", type=int, default=4)
p.add_argument("--max-steps", type=int, default=1000)
p.add_argument("--no-loss-kwargs", action="store_true")
p.add_argument("--sleep-ms", type=float, default=0.0)
p.add_argument("--log-losses", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)
PAD = 0


class Padded(torch.utils.data.Dataset):
    """Sequences of 4 to 32 tokens, right-padded to 32."""

    def __init__(self, n=1024, width=32):
        g = torch.Generator().manual_seed(2)
        self.lengths = torch.randint(4, width + 1, (n,), generator=g)
        self.ids = torch.randint(1, 128, (n, width), generator=g)
        self.width = width

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        n = int(self.lengths[i])
        mask = (torch.arange(self.width) < n).long()
        ids = self.ids[i].masked_fill(mask == 0, PAD)
        return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


class Wait(TrainerCallback):
    def on_substep_end(self, targs, state, control, **kwargs):
        time.sleep(args.sleep_ms / 1000)

    def on_step_end(self, targs, state, control, **kwargs):
        time.sleep(args.sleep_ms / 1000)


config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                     num_key_value_heads=2, max_position_embeddings=32, attention_dropout=0.0, pad_token_id=PAD)
model = LlamaForCausalLM(config)
if args.no_loss_kwargs:
    model.accepts_loss_kwargs = False
with tempfile.TemporaryDirectory() as out:
    targs = TrainingArguments(output_dir=out, max_steps=args.max_steps, per_device_train_batch_size=args.batch_size,
                              gradient_accumulation_steps=args.accumulation, learning_rate=1e-3, use_cpu=True, seed=0,
                              report_to=[], save_strategy="no", disable_tqdm=True,
                              logging_strategy="steps" if args.log_losses else "no", logging_steps=1,
                              dataloader_num_workers=0, lr_scheduler_type="constant", warmup_steps=0)
    trainer = Trainer(model=model, args=targs, train_dataset=Padded(), callbacks=[Wait()])
    trainer.train()
    if args.log_losses:
        for h in trainer.state.log_history:
            if "loss" in h:
                print("LOSS " + json.dumps(h["loss"]), flush=True)
