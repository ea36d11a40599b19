"""brim corpus: writes data/imagefolder/{train,val}/<class>/*.jpg, an ImageFolder of real JPEG files
(smooth random colour fields with noise, 640x480, quality 90: files of the size and decoding cost of
photos), so that imagenet/main.py reads, decodes and augments image files in its DataLoader, as it
does on ImageNet, instead of making tensors (--dummy).

Not upstream code.
"""
import os

import numpy as np
from PIL import Image

rng = np.random.default_rng(0)
root = os.path.join("data", "imagefolder")
for split, per_class in (("train", 160), ("val", 16)):
    for c in range(4):
        folder = os.path.join(root, split, "class%d" % c)
        os.makedirs(folder, exist_ok=True)
        for i in range(per_class):
            coarse = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
            base = np.asarray(Image.fromarray(coarse).resize((640, 480), Image.BICUBIC), dtype=np.int16)
            noisy = np.clip(base + rng.integers(-24, 25, base.shape), 0, 255).astype(np.uint8)
            Image.fromarray(noisy).save(os.path.join(folder, "%04d.jpg" % i), quality=90)
print("wrote", root)
