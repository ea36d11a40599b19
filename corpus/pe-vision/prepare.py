"""brim corpus: writes data/MNIST/raw/ in the format torchvision.datasets.MNIST reads (the four
uncompressed IDX files it would download and unpack), with random pixels and labels, so that mnist/main.py
and vae/main.py (run from their own folders, reading '../data') find them and download nothing.
dcgan (--dataset fake) and imagenet (--dummy) make their own data.

Not upstream code.
"""
import os
import struct

import numpy as np

out = os.path.join("data", "MNIST", "raw")
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
for prefix, n in (("train", 60000), ("t10k", 10000)):
    with open(os.path.join(out, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28) + rng.integers(0, 256, n * 28 * 28, dtype=np.uint8).tobytes())
    with open(os.path.join(out, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 2049, n) + rng.integers(0, 10, n, dtype=np.uint8).tobytes())
print("wrote", out)
