"""Everything `litgpt pretrain --config pretrain.yaml` reads, generated here (nothing is downloaded):
text files under data/train and data/val (sentences over a small made-up vocabulary), and a word-level
tokenizer built with the `tokenizers` package and saved as tokenizer/tokenizer.json with the
tokenizer_config.json litgpt reads its <s> and </s> tokens from."""

import json
import os
import random

from tokenizers import Tokenizer, models, pre_tokenizers

WORDS = ["w%d" % i for i in range(500)]
SPECIAL = ["<unk>", "<s>", "</s>"]

rng = random.Random(0)
for split, files in (("train", 8), ("val", 1)):
    os.makedirs(os.path.join("data", split), exist_ok=True)
    for n in range(files):
        with open(os.path.join("data", split, "part-%d.txt" % n), "w", encoding="utf8") as f:
            for _ in range(400):
                start = rng.randrange(len(WORDS))
                f.write(" ".join(WORDS[(start + rng.randrange(6)) % len(WORDS)] for _ in range(rng.randint(10, 40))) + "\n")

vocab = {token: i for i, token in enumerate(SPECIAL + WORDS)}
tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
os.makedirs("tokenizer", exist_ok=True)
tokenizer.save(os.path.join("tokenizer", "tokenizer.json"))
with open(os.path.join("tokenizer", "tokenizer_config.json"), "w") as f:
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True}, f)
print("wrote data/train, data/val and tokenizer/ (vocabulary %d)" % len(vocab))
