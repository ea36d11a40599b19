"""brim corpus: writes examples/Datasets/MNIST/complete/{training,test}.pt, the files
lightning.pytorch.demos.mnist_datamodule.MNIST loads (and would otherwise download): a tuple of a uint8
image tensor and a label tensor, 60,000 and 10,000 random images (the example splits the training set
55,000 / 5,000, so it needs exactly 60,000).

Not upstream code.
"""
import os

import torch

out = os.path.join("examples", "Datasets", "MNIST", "complete")
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(0)
for name, n in (("training.pt", 60000), ("test.pt", 10000)):
    torch.save((torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=g), torch.randint(0, 10, (n,), generator=g)), os.path.join(out, name))
print("wrote", out)
