"""brim corpus: writes input.txt, the text file minGPT's projects/chargpt/chargpt.py reads from the
working directory (the project suggests Tiny Shakespeare), as 300,000 random characters, so that the
script runs offline. projects/adder/adder.py makes its own data and needs nothing.

Not upstream code.
"""
import random

rng = random.Random(0)
alphabet = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,;:!?'\n"
with open("input.txt", "w", encoding="utf8") as f:
    f.write("".join(rng.choice(alphabet) for _ in range(300_000)))
print("wrote input.txt")
