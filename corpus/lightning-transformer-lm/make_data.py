"""Writes data/wikitext-2.txt, the file lightning.pytorch.demos.WikiText2 reads when it is present
(so nothing is downloaded): lines of words drawn from a fixed vocabulary of 1,000 (w0 … w999), every
word used at least once, so the demo's dictionary has 1,001 entries (with <eos>) as config.yaml says."""

import os
import random

VOCAB = 1000
LINES = 4000

rng = random.Random(0)
os.makedirs("data", exist_ok=True)
with open(os.path.join("data", "wikitext-2.txt"), "w", encoding="utf8") as f:
    f.write(" ".join("w%d" % i for i in range(VOCAB)) + "\n")
    for _ in range(LINES):
        start = rng.randrange(VOCAB)
        f.write(" ".join("w%d" % ((start + rng.randrange(8)) % VOCAB) for _ in range(rng.randint(8, 24))) + "\n")
print("wrote data/wikitext-2.txt")
