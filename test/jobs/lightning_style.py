"""A Lightning-style job: a LightningModule with training_step/configure_optimizers fitted by a
Trainer, the optimizer stepped with a closure (forward and backward run inside optimizer.step, as in
Lightning's automatic optimization), and a callback printing the samples/s the job measures.
Uses Lightning when it is installed; otherwise a stand-in Trainer that drives the same hooks in
Lightning's order (CI has no Lightning)."""

import argparse
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--max-steps", type=int, default=60)
p.add_argument("--log-every", type=int, default=5)
p.add_argument("--stand-in", action="store_true", help="use the stand-in Trainer even when Lightning is installed")
args = p.parse_args()

pl = None
if not args.stand_in:
    try:
        import lightning.pytorch as pl
    except ImportError:
        pl = None

if pl is not None:
    Base, CallbackBase = pl.LightningModule, pl.Callback
else:
    Base, CallbackBase = torch.nn.Module, object


class Classifier(Base):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                       torch.nn.ReLU(), torch.nn.Linear(512, 4))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


class Throughput(CallbackBase):
    def __init__(self):
        self.step, self.seen, self.t = 0, 0, time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.step += 1
        self.seen += batch[0].shape[0]
        if self.step % args.log_every == 0:
            now = time.perf_counter()
            print("step %d: %.1f samples/s" % (self.step, self.seen / (now - self.t)), flush=True)
            self.seen, self.t = 0, now


class StandInTrainer:
    """Lightning's automatic optimization, reduced: fetch, on_train_batch_start, optimizer.step(closure)
    with zero_grad + training_step + backward in the closure, on_train_batch_end, a tqdm-style bar."""

    def __init__(self, max_steps, callbacks):
        self.max_steps, self.callbacks, self.global_step = max_steps, callbacks, 0

    def fit(self, module, loader):
        opt = module.configure_optimizers()
        for epoch in range(10 ** 6):
            for batch_idx, batch in enumerate(loader):
                holder = {}

                def closure():
                    opt.zero_grad()
                    loss = module.training_step(batch, batch_idx)
                    loss.backward()
                    holder["loss"] = loss
                    return loss

                opt.step(closure=closure)
                self.global_step += 1
                for cb in self.callbacks:
                    cb.on_train_batch_end(self, module, holder["loss"], batch, batch_idx)
                sys.stderr.write("\rEpoch %d: %3d%%| %d/%d [00:00<00:00, v_num=0, loss=%.3f]" % (
                    epoch, 100 * (batch_idx + 1) // len(loader), batch_idx + 1, len(loader), holder["loss"].item()))
                if self.global_step >= self.max_steps:
                    sys.stderr.write("\n")
                    return


torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(1024, 64), torch.randint(0, 4, (1024,)))
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True)
model = Classifier()
if pl is not None:
    trainer = pl.Trainer(max_steps=args.max_steps, accelerator="auto", devices=1, logger=False, enable_checkpointing=False,
                         enable_model_summary=False, callbacks=[Throughput()])
else:
    trainer = StandInTrainer(args.max_steps, [Throughput()])
trainer.fit(model, loader)
