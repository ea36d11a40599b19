"""Lightning's own DDP on CPU with no launcher: the script is rank 0 and starts the other rank itself
(Lightning's subprocess launcher, which sets LOCAL_RANK / NODE_RANK / WORLD_SIZE but not RANK)."""

import argparse

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--max-steps", type=int, default=1000)
args = p.parse_args()
torch.set_num_threads(1)


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


data = TensorDataset(torch.randn(4096, 32), torch.randint(0, 4, (4096,)))
trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=args.max_steps, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
trainer.fit(Net(), DataLoader(data, batch_size=16))
