"""Our driver of denoising-diffusion-pytorch's Trainer (the package ships no training CLI): it reads
train.yaml, builds the package's Unet and GaussianDiffusion with the YAML's `unet` and `diffusion`
arguments, and hands the `trainer` section unchanged to denoising_diffusion_pytorch.Trainer, whose loop
drives HF accelerate's Accelerator directly (prepare, autocast, backward, clip_grad_norm_), with no
transformers Trainer. The batch settings are the trainer's own arguments in the YAML:
train_batch_size, gradient_accumulate_every, amp."""

import sys
from typing import Any, Dict

import yaml
from denoising_diffusion_pytorch import GaussianDiffusion, Trainer, Unet


def main(path: str) -> None:
    with open(path, encoding="utf8") as f:
        config: Dict[str, Any] = yaml.safe_load(f)
    model = Unet(**config["unet"])
    diffusion = GaussianDiffusion(model, **config["diffusion"])
    trainer = Trainer(diffusion, config["images"], **config["trainer"])
    trainer.train()


if __name__ == "__main__":
    main(sys.argv[sys.argv.index("--config") + 1] if "--config" in sys.argv else "train.yaml")
