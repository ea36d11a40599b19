"""brim corpus: writes data/imagefolder/{train,val}/<class>/*.jpg, an ImageFolder of real JPEG files
(smooth random colour fields with noise, 640x480, quality 90: files of the size and decoding cost of
photos), so that imagenet/main.py reads, decodes and augments image files in its DataLoader, as it
does on ImageNet, instead of making tensors (--dummy).

    python prepare_imagefolder.py                                   # data/imagefolder, 640x480
    python prepare_imagefolder.py --root data/smallfolder --size 96x96 --train 512 --val 0

The second form writes many small files (a face or thumbnail set) for dcgan/main.py --dataset folder.

Not upstream code.
"""
import argparse
import os

import numpy as np
from PIL import Image

parser = argparse.ArgumentParser()
parser.add_argument("--root", default=os.path.join("data", "imagefolder"))
parser.add_argument("--size", default="640x480", help="WIDTHxHEIGHT")
parser.add_argument("--train", type=int, default=160, help="files per class in train/")
parser.add_argument("--val", type=int, default=16, help="files per class in val/")
parser.add_argument("--classes", type=int, default=4)
args = parser.parse_args()
width, height = (int(v) for v in args.size.split("x"))

rng = np.random.default_rng(0)
for split, per_class in (("train", args.train), ("val", args.val)):
    for c in range(args.classes if per_class > 0 else 0):
        folder = os.path.join(args.root, split, "class%d" % c)
        os.makedirs(folder, exist_ok=True)
        for i in range(per_class):
            coarse = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
            base = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BICUBIC), dtype=np.int16)
            noisy = np.clip(base + rng.integers(-24, 25, base.shape), 0, 255).astype(np.uint8)
            Image.fromarray(noisy).save(os.path.join(folder, "%04d.jpg" % i), quality=90)
print("wrote", args.root)
