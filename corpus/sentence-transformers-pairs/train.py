"""Our driver of sentence-transformers' own trainer (the library ships no training CLI): it reads
train.yaml, loads the SentenceTransformer saved by make_data.py and the generated pairs, and fits it
with SentenceTransformerTrainer and MultipleNegativesRankingLoss (in-batch negatives). Every setting of
the run, the batch included, is the `training` section of the YAML, handed unchanged to
SentenceTransformerTrainingArguments."""

import sys
from typing import Any, Dict

import yaml
from datasets import load_dataset
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss


def main(path: str) -> None:
    with open(path, encoding="utf8") as f:
        config: Dict[str, Any] = yaml.safe_load(f)
    model = SentenceTransformer(config["model"], device="cpu")
    pairs = load_dataset("json", data_files=config["data"], split="train")
    args = SentenceTransformerTrainingArguments(**config["training"])
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=pairs, loss=MultipleNegativesRankingLoss(model))
    trainer.train()


if __name__ == "__main__":
    main(sys.argv[sys.argv.index("--config") + 1] if "--config" in sys.argv else "train.yaml")
