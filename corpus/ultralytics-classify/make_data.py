"""Writes the image folder the ultralytics-classify entry trains on (brim's corpus, docs/corpus.md):
data/shapes/{train,val}/{circle,square,triangle}/NNN.png, 32x32 RGB, one filled shape of a random
colour, place and size on a noise background. Seeded: the same files on every machine."""

import os
import random

from PIL import Image, ImageDraw

HERE = os.path.dirname(os.path.abspath(__file__))
CLASSES = ("circle", "square", "triangle")
SPLITS = (("train", 480), ("val", 48))
SIZE = 32


def draw_one(rng: random.Random, shape: str) -> Image.Image:
    image = Image.effect_noise((SIZE, SIZE), 40).convert("RGB")
    draw = ImageDraw.Draw(image)
    x, y, side = rng.randint(2, 14), rng.randint(2, 14), rng.randint(10, 16)
    fill = tuple(rng.randint(120, 255) for _ in range(3))
    if shape == "circle":
        draw.ellipse((x, y, x + side, y + side), fill=fill)
    elif shape == "square":
        draw.rectangle((x, y, x + side, y + side), fill=fill)
    else:
        draw.polygon([(x, y + side), (x + side, y + side), (x + side // 2, y)], fill=fill)
    return image


def main() -> None:
    rng = random.Random(0)
    root = os.path.join(HERE, "data", "shapes")
    for split, count in SPLITS:
        for shape in CLASSES:
            folder = os.path.join(root, split, shape)
            os.makedirs(folder, exist_ok=True)
            for i in range(count // len(CLASSES)):
                draw_one(rng, shape).save(os.path.join(folder, "%03d.png" % i))
    print("make_data: %s" % root)


if __name__ == "__main__":
    main()
