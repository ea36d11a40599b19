"""brim corpus: writes the four MNIST files that jax's examples/datasets.py reads from
/tmp/jax_example_data/ (gzip'd IDX, as on the download site), with random pixels and labels and
6,000 training images instead of 60,000, so that mnist_classifier.py runs offline and finds the
files it would otherwise download.

Not upstream code.
"""
import gzip
import os
import struct

import numpy as np

out = "/tmp/jax_example_data/"
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
for prefix, n in (("train", 6000), ("t10k", 1000)):
    with gzip.open(os.path.join(out, prefix + "-images-idx3-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28) + rng.integers(0, 256, n * 28 * 28, dtype=np.uint8).tobytes())
    with gzip.open(os.path.join(out, prefix + "-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">II", 2049, n) + rng.integers(0, 10, n, dtype=np.uint8).tobytes())
print("wrote", out)
