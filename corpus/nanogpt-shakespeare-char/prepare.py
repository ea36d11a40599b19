"""brim corpus: writes data/shakespeare_char/{train,val}.bin and meta.pkl in the format of nanoGPT's
data/shakespeare_char/prepare.py (uint16 token ids, a pickled dict with vocab_size, itos, stoi), from
random characters instead of the downloaded Tiny Shakespeare, so that train.py runs offline.

Not upstream code.
"""
import os
import pickle

import numpy as np

out = os.path.join("data", "shakespeare_char")
os.makedirs(out, exist_ok=True)
chars = sorted(set("\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))
rng = np.random.default_rng(0)
for name, n in (("train.bin", 1_000_000), ("val.bin", 100_000)):
    rng.integers(0, len(chars), n, dtype=np.uint16).tofile(os.path.join(out, name))
meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}}
with open(os.path.join(out, "meta.pkl"), "wb") as f:
    pickle.dump(meta, f)
print("wrote", out, "vocab", len(chars))
