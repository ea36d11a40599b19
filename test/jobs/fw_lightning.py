"""The real Lightning Trainer on CPU: a small classifier, generated data, gradient accumulation,
`--precision` as Lightning spells it (32-true, bf16-mixed)."""

import argparse

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from fw_meter import Meter

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--accumulate", type=int, default=2)
p.add_argument("--precision", default="32-true")
p.add_argument("--max-steps", type=int, default=1000)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


class Rate(L.Callback):
    def __init__(self):
        self.meter = Meter(args.batch_size * args.accumulate)
        self.seen = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        while self.seen < trainer.global_step:
            self.seen += 1
            self.meter.step()


data = TensorDataset(torch.randn(4096, 32), torch.randint(0, 4, (4096,)))
trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=args.max_steps, precision=args.precision,
                    accumulate_grad_batches=args.accumulate, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, callbacks=[Rate()])
trainer.fit(Classifier(), DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True))
