"""A Hugging Face Trainer-style job: dict batches (input_ids, attention_mask, labels), gradient
accumulation (several loader batches per optimizer step), gradient clipping, an LR scheduler, and
the Trainer's log lines ({'loss': ..., 'learning_rate': ..., 'epoch': ...}) with the samples per
second the job measures. The loop is a stand-in for transformers.Trainer's inner loop (CI has no
transformers); it runs the same calls in the same order."""

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--per-device-train-batch-size", type=int, default=8)
p.add_argument("--gradient-accumulation-steps", type=int, default=2)
p.add_argument("--max-steps", type=int, default=60)
p.add_argument("--logging-steps", type=int, default=5)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
VOCAB, LEN = 1000, 32


class Texts(Dataset):
    def __init__(self, n):
        self.ids = torch.randint(1, VOCAB, (n, LEN))
        self.labels = torch.randint(0, 2, (n,))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(LEN, dtype=torch.long), "labels": self.labels[i]}


class TinyEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 128)
        layer = torch.nn.TransformerEncoderLayer(128, 4, 256, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 1)
        self.head = torch.nn.Linear(128, 2)

    def forward(self, input_ids, attention_mask, labels):
        h = self.enc(self.emb(input_ids), src_key_padding_mask=attention_mask == 0)
        logits = self.head(h.mean(1))
        return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}


model = TinyEncoder()
loader = DataLoader(Texts(args.per_device_train_batch_size * 64), batch_size=args.per_device_train_batch_size,
                    shuffle=True, drop_last=True)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - s / (args.max_steps + 1))
accum = args.gradient_accumulation_steps
global_step = 0
seen = 0
t_log = time.perf_counter()
epoch = 0
while global_step < args.max_steps:
    for step, inputs in enumerate(loader):
        loss = model(**inputs)["loss"] / accum
        loss.backward()
        seen += inputs["input_ids"].shape[0]
        if (step + 1) % accum != 0:
            continue
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        global_step += 1
        if global_step % args.logging_steps == 0:
            now = time.perf_counter()
            print({"loss": round(loss.item() * accum, 4), "learning_rate": scheduler.get_last_lr()[0],
                   "epoch": round(epoch + step / len(loader), 2), "train_samples_per_second": round(seen / (now - t_log), 3)},
                  flush=True)
            seen, t_log = 0, now
        if global_step >= args.max_steps:
            break
    epoch += 1
