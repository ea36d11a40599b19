#!/usr/bin/env python3
"""A small BERT sequence classifier trained by the Hugging Face Trainer, reported to brim by one
callback.

    python examples/hf-trainer/train.py --config examples/hf-trainer/config.yaml [--steps N]
    brim run --cap 6GiB -- python examples/hf-trainer/train.py --config examples/hf-trainer/config.yaml
    brim tune -- python examples/hf-trainer/train.py --config examples/hf-trainer/config.yaml

The brim part is one line: `Trainer(..., callbacks=[BrimTrainerCallback()])`. The callback reports
every optimizer step as a brim step and stops training at the trial's step budget; the knobs of a
trial (batch_size, accumulation, precision, num_workers, pin_memory) are read with `brim.knob`, the
config value as the default. The model is built from a config (nothing is downloaded). Where
transformers is not installed the job prints one line saying so and exits 0.
"""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

brim = common.import_brim()
import brim.hf  # noqa: E402

try:
    import transformers  # noqa: E402
except ImportError:
    print("[hf-trainer] skipped: transformers is not installed (pip install transformers)")
    sys.exit(0)

import brim.torch as bt  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402


class Tokens(Dataset):
    """Random token sequences whose label is decided by which quarter of the vocabulary dominates."""

    def __init__(self, n, seq_len, vocab, labels, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, vocab, (n, seq_len), generator=g)
        self.labels = (self.ids * labels // vocab).mode(dim=1).values.long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        ids = self.ids[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": self.labels[i]}


def main():
    args = common.parse_args(__doc__.splitlines()[0])
    cfg = common.load_config(args.config, args.set)
    get = common.get
    config = transformers.BertConfig(
        vocab_size=get(cfg, "model.vocab_size", 8000), hidden_size=get(cfg, "model.hidden_size", 256),
        num_hidden_layers=get(cfg, "model.layers", 4), num_attention_heads=get(cfg, "model.heads", 4),
        intermediate_size=get(cfg, "model.intermediate_size", 1024), max_position_embeddings=get(cfg, "model.seq_len", 128),
        num_labels=get(cfg, "model.labels", 4))
    torch.manual_seed(get(cfg, "seed", 0))
    model = transformers.BertForSequenceClassification(config)
    if args.print_params:
        total = sum(p.numel() for p in model.parameters())
        print(f"params_total={total} params_trainable={sum(p.numel() for p in model.parameters() if p.requires_grad)}")
        return

    bt.apply_cap()
    batch_size = int(brim.knob("batch_size", get(cfg, "data_loader.batch_size", 8)))
    accumulation = int(brim.knob("accumulation", get(cfg, "training.trainer.accumulate_grad_batches", 1)))
    precision = str(brim.knob("precision", get(cfg, "training.precision", "fp32")))
    if precision == "tf32":
        bt.configure(tf32=True)
    loader = bt.loader_kwargs(num_workers=get(cfg, "data_loader.num_workers", 0), pin_memory=get(cfg, "data_loader.pin_memory", False))
    steps = args.steps or brim.step_budget() or get(cfg, "training.max_steps", 30)
    data = Tokens(get(cfg, "data.samples", 20000), get(cfg, "model.seq_len", 128), get(cfg, "model.vocab_size", 8000), get(cfg, "model.labels", 4), get(cfg, "data.seed", 1234))
    with tempfile.TemporaryDirectory(prefix="brim-hf-") as out:
        targs = transformers.TrainingArguments(
            output_dir=out,
            max_steps=steps,
            per_device_train_batch_size=batch_size,
            gradient_accumulation_steps=accumulation,
            learning_rate=get(cfg, "training.lr", 1e-4),
            bf16=precision == "bf16-mixed",
            fp16=precision == "fp16-mixed",
            dataloader_num_workers=loader["num_workers"],
            dataloader_pin_memory=loader["pin_memory"],
            logging_steps=10,
            save_strategy="no",
            report_to=[],
            seed=get(cfg, "seed", 0),
        )
        trainer = transformers.Trainer(model=model, args=targs, train_dataset=data, callbacks=[brim.hf.BrimTrainerCallback()])
        result = trainer.train()
    print(f"[hf-trainer] done steps={result.global_step} batch_size={batch_size} accumulation={accumulation} precision={precision} "
          f"final_loss={result.training_loss:.4f} device={model.device.type}")


if __name__ == "__main__":
    main()
