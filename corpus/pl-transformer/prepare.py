"""brim corpus: writes data/wikitext-2.txt, the file lightning.pytorch.demos.WikiText2 reads (and would
otherwise download), from random Zipf-distributed words of a 2,000-word vocabulary, so that the script
runs offline. WikiText2 still needs `requests` importable even when the file is there.

Not upstream code.
"""
import os
import random

rng = random.Random(0)
vocab = ["w%d" % i for i in range(2000)]
weights = [1.0 / (i + 1) for i in range(len(vocab))]
os.makedirs("data", exist_ok=True)
words = rng.choices(vocab, weights, k=300_000)
with open(os.path.join("data", "wikitext-2.txt"), "w", encoding="utf8") as f:
    for at in range(0, len(words), 40):
        f.write(" " + " ".join(words[at:at + 40]) + " \n")
print("wrote data/wikitext-2.txt")
