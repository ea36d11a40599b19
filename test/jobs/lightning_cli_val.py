"""A LightningCLI job with a LightningDataModule whose validation set (80 samples) is smaller than its
training set (480): Lightning runs its sanity check on two validation batches before the first
training step, validates every `--trainer.val_check_interval` steps, and shows its progress bar.
The training and validation DataLoaders are built by the same method of the data module, at one line
(`_loader`), as Lightning's own hooks build them in many jobs."""

import torch
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)


class Data(LightningDataModule):
    def __init__(self, batch_size: int = 8, train_size: int = 480, val_size: int = 80):
        super().__init__()
        self.batch_size = batch_size
        g = torch.Generator().manual_seed(0)
        self.train = TensorDataset(torch.randn(train_size, 16, generator=g), torch.randint(0, 4, (train_size,), generator=g))
        self.val = TensorDataset(torch.randn(val_size, 16, generator=g), torch.randint(0, 4, (val_size,), generator=g))

    def _loader(self, data: TensorDataset, shuffle: bool) -> DataLoader:
        return DataLoader(data, batch_size=self.batch_size, shuffle=shuffle)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train, True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val, False)


class Model(LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    LightningCLI(Model, Data, seed_everything_default=0, save_config_callback=None,
                 trainer_defaults={"accelerator": "cpu", "devices": 1, "logger": False, "enable_checkpointing": False,
                                   "enable_model_summary": False})
