"""Writes the image folder the denoising-diffusion-shapes entry trains on (brim's corpus, docs/corpus.md):
data/shapes/NNNN.png, 16x16 RGB, a filled disc, square or triangle of a random colour, place and size
on a dark background with a little noise. Unconditional diffusion needs no labels, so the images lie in
one folder. Seeded: the same files on every machine; nothing is downloaded."""

import os
import random

from PIL import Image, ImageDraw

SIZE = 16
IMAGES = 512


def draw_one(rng: random.Random) -> Image.Image:
    image = Image.new("RGB", (SIZE, SIZE), tuple(rng.randint(0, 40) for _ in range(3)))
    draw = ImageDraw.Draw(image)
    side = rng.randint(5, 10)
    x, y = rng.randint(0, SIZE - side - 1), rng.randint(0, SIZE - side - 1)
    fill = tuple(rng.randint(100, 255) for _ in range(3))
    shape = rng.choice(("disc", "square", "triangle"))
    if shape == "disc":
        draw.ellipse((x, y, x + side, y + side), fill=fill)
    elif shape == "square":
        draw.rectangle((x, y, x + side, y + side), fill=fill)
    else:
        draw.polygon([(x, y + side), (x + side, y + side), (x + side // 2, y)], fill=fill)
    for _ in range(SIZE):
        image.putpixel((rng.randrange(SIZE), rng.randrange(SIZE)), tuple(rng.randint(0, 80) for _ in range(3)))
    return image


def main() -> None:
    rng = random.Random(0)
    folder = os.path.join("data", "shapes")
    os.makedirs(folder, exist_ok=True)
    for i in range(IMAGES):
        draw_one(rng).save(os.path.join(folder, "%04d.png" % i))
    print("wrote %s (%d images of %dx%d)" % (folder, IMAGES, SIZE, SIZE))


if __name__ == "__main__":
    main()
