"""brim corpus: writes what run_clm.py reads, offline: data/train.txt (random Zipf-distributed words of a
2,000-word vocabulary, one paragraph per line) and data/tokenizer/, a word-level fast tokenizer over that
vocabulary saved with save_pretrained, so that `--tokenizer_name data/tokenizer` needs no hub download.
The model is built from a config (`--model_type gpt2 --config_overrides ...`), so no weights are fetched.

Not upstream code.
"""
import os
import random

from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from transformers import PreTrainedTokenizerFast

rng = random.Random(0)
vocab = ["w%d" % i for i in range(2000)]
weights = [1.0 / (i + 1) for i in range(len(vocab))]
os.makedirs("data", exist_ok=True)
words = rng.choices(vocab, weights, k=200_000)
with open(os.path.join("data", "train.txt"), "w", encoding="utf8") as f:
    for at in range(0, len(words), 40):
        f.write(" ".join(words[at:at + 40]) + "\n")

ids = {"<unk>": 0, "<|endoftext|>": 1}
ids.update({w: i + 2 for i, w in enumerate(vocab)})
core = Tokenizer(WordLevel(ids, unk_token="<unk>"))
core.pre_tokenizer = WhitespaceSplit()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", eos_token="<|endoftext|>", model_max_length=128)
tokenizer.save_pretrained(os.path.join("data", "tokenizer"))
print("wrote data/train.txt and data/tokenizer")
