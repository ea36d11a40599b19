"""brim corpus: writes the MNIST files that lightning.pytorch.demos.mnist_datamodule.MNIST looks for
when torchvision is installed, so that nothing is downloaded: it first calls
torchvision.datasets.MNIST("./data", download=True) in the working directory, then reads
examples/Datasets/MNIST (the example's DATASETS_PATH). Both get the four uncompressed IDX files of
MNIST/raw, with random pixels and labels; 60,000 training images, since the example splits them
55,000 / 5,000. Run it from the entry's folder.

Not upstream code.
"""
import os
import struct

import numpy as np

rng = np.random.default_rng(0)
files = {}
for prefix, n in (("train", 60000), ("t10k", 10000)):
    files[prefix + "-images-idx3-ubyte"] = struct.pack(">IIII", 2051, n, 28, 28) + rng.integers(0, 256, n * 28 * 28, dtype=np.uint8).tobytes()
    files[prefix + "-labels-idx1-ubyte"] = struct.pack(">II", 2049, n) + rng.integers(0, 10, n, dtype=np.uint8).tobytes()
for root in (os.path.join("examples", "pytorch", "basics", "data"), os.path.join("examples", "Datasets")):
    out = os.path.join(root, "MNIST", "raw")
    os.makedirs(out, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("wrote", out)
