"""brim corpus: writes a synthetic stand-in for WikiText-2 (train/valid/test.txt) where main.py reads it.

Not upstream code. The files have WikiText-2's shape (one paragraph per line, words separated by spaces,
`data.Corpus` appends <eos>), but random Zipf-distributed words from a 2,000-word vocabulary, so that
the script runs offline and a step stays short on a small CPU.
"""
import os
import random
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("data", "wikitext-2")
rng = random.Random(0)
vocab = ["w%d" % i for i in range(2000)]
weights = [1.0 / (i + 1) for i in range(len(vocab))]
os.makedirs(out, exist_ok=True)
for name, tokens in (("train.txt", 200_000), ("valid.txt", 10_000), ("test.txt", 10_000)):
    words = rng.choices(vocab, weights, k=tokens)
    with open(os.path.join(out, name), "w", encoding="utf8") as f:
        for at in range(0, tokens, 40):
            f.write(" " + " ".join(words[at:at + 40]) + " \n")
print("wrote", out)
