"""brim corpus: writes data/MNIST/raw/ in the format torchvision.datasets.MNIST reads (the four
uncompressed IDX files it would download and unpack), with random pixels and labels and 6,000 training
images instead of 60,000, so that accelerate's examples/mnist_example.py (DSDIR=data) finds them and
downloads nothing.

Not upstream code.
"""
import os
import struct

import numpy as np

out = os.path.join("data", "MNIST", "raw")
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
for prefix, n in (("train", 6000), ("t10k", 1000)):
    with open(os.path.join(out, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28) + rng.integers(0, 256, n * 28 * 28, dtype=np.uint8).tobytes())
    with open(os.path.join(out, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 2049, n) + rng.integers(0, 10, n, dtype=np.uint8).tobytes())
print("wrote", out)
