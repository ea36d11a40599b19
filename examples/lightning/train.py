#!/usr/bin/env python3
"""An MLP classifier trained by PyTorch Lightning, reported to brim by one callback.

    python examples/lightning/train.py --config examples/lightning/config.yaml [--steps N]
    brim run --cap 6GiB -- python examples/lightning/train.py --config examples/lightning/config.yaml
    brim tune -- python examples/lightning/train.py --config examples/lightning/config.yaml

The brim part is one line: `Trainer(callbacks=[BrimCallback()])`. The callback reports every training
batch as a brim step and stops the trainer at the trial's step budget; the knobs of a trial
(batch_size, accumulation, precision, num_workers, pin_memory) are read with `brim.knob`, the config
value as the default. Where Lightning is not installed the job prints one line saying so and exits 0.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

brim = common.import_brim()
import brim.lightning  # noqa: E402

if not brim.lightning.AVAILABLE:
    print("[lightning] skipped: Lightning is not installed (pip install lightning)")
    sys.exit(0)

import brim.torch as bt  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

pl = brim.lightning._pl
PRECISION = {"fp32": "32-true", "tf32": "32-true", "bf16-mixed": "bf16-mixed", "fp16-mixed": "16-mixed"}


class Classifier(pl.LightningModule):
    def __init__(self, features, hidden, layers, classes, lr):
        super().__init__()
        dims = [features] + [hidden] * layers
        body = []
        for a, b in zip(dims, dims[1:]):
            body += [nn.Linear(a, b), nn.GELU()]
        self.net = nn.Sequential(*body, nn.Linear(hidden, classes))
        self.lr = lr

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


def main():
    args = common.parse_args(__doc__.splitlines()[0])
    cfg = common.load_config(args.config, args.set)
    get = common.get
    model = Classifier(get(cfg, "model.features", 64), get(cfg, "model.hidden", 1024), get(cfg, "model.layers", 4), get(cfg, "model.classes", 10), get(cfg, "training.lr", 1e-3))
    if args.print_params:
        total = sum(p.numel() for p in model.parameters())
        print(f"params_total={total} params_trainable={total}")
        return

    pl.seed_everything(get(cfg, "seed", 0), verbose=False)
    bt.apply_cap()
    batch_size = int(brim.knob("batch_size", get(cfg, "data_loader.batch_size", 32)))
    accumulation = int(brim.knob("accumulation", get(cfg, "training.trainer.accumulate_grad_batches", 1)))
    precision = str(brim.knob("precision", get(cfg, "training.precision", "fp32")))
    if precision == "tf32":
        bt.configure(tf32=True)
    n = get(cfg, "data.samples", 20000)
    g = torch.Generator().manual_seed(get(cfg, "data.seed", 1234))
    x = torch.randn(n, get(cfg, "model.features", 64), generator=g)
    y = (x[:, :10].argmax(dim=1) % get(cfg, "model.classes", 10)).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True, drop_last=True,
                        **bt.loader_kwargs(num_workers=get(cfg, "data_loader.num_workers", 0), pin_memory=get(cfg, "data_loader.pin_memory", False)))
    steps = args.steps or brim.step_budget() or get(cfg, "training.max_steps", 50)
    trainer = pl.Trainer(
        max_steps=steps,
        accelerator="auto",
        devices=1,
        precision=PRECISION.get(precision, "32-true"),
        accumulate_grad_batches=accumulation,
        callbacks=[brim.lightning.BrimCallback()],
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    )
    trainer.fit(model, loader)
    loss = trainer.callback_metrics.get("loss")
    print(f"[lightning] done steps={trainer.global_step} batch_size={batch_size} accumulation={accumulation} precision={precision} "
          f"final_loss={float(loss) if loss is not None else float('nan'):.4f} device={model.device.type}")


if __name__ == "__main__":
    main()
