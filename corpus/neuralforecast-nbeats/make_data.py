"""Writes data/series.csv, the long table neuralforecast reads (unique_id, ds, y): 64 hourly series
of 500 points each, every one a trend plus a daily and a weekly cycle of its own amplitude and phase
plus noise. Nothing is downloaded."""

import math
import os
import random

SERIES = 64
POINTS = 500


def main() -> None:
    rng = random.Random(0)
    os.makedirs("data", exist_ok=True)
    with open(os.path.join("data", "series.csv"), "w", encoding="utf8") as f:
        f.write("unique_id,ds,y\n")
        for s in range(SERIES):
            level, slope = rng.uniform(10, 100), rng.uniform(-0.01, 0.02)
            daily, weekly = rng.uniform(1, 10), rng.uniform(0, 5)
            phase = rng.uniform(0, 2 * math.pi)
            for t in range(POINTS):
                y = (level + slope * t + daily * math.sin(2 * math.pi * t / 24 + phase)
                     + weekly * math.sin(2 * math.pi * t / 168) + rng.gauss(0, 1))
                f.write("s%d,%d,%.4f\n" % (s, t, y))
    print("wrote data/series.csv (%d series of %d points)" % (SERIES, POINTS))


if __name__ == "__main__":
    main()
