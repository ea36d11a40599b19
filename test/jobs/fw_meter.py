"""The framework jobs' own measure (test/frameworks/): each job calls `Meter.step()` after every
optimizer step and prints its rate since warm-up the way a user's script would, so brim's figure can
be checked against the job's. With FW_PID_DIR set, each process writes a file named by its pid at its
first step (the Ctrl-C test looks for them)."""

import os
import time


class Meter:
    def __init__(self, samples_per_step, warmup=5, every=5, label=""):
        self.samples_per_step = samples_per_step
        self.warmup = warmup
        self.every = every
        self.label = label
        self.steps = 0
        self.t0 = None

    def step(self):
        self.steps += 1
        if self.steps == 1 and os.environ.get("FW_PID_DIR"):
            open(os.path.join(os.environ["FW_PID_DIR"], str(os.getpid())), "w").close()
        if self.steps == self.warmup:
            self.t0 = time.perf_counter()
        elif self.steps > self.warmup and (self.steps - self.warmup) % self.every == 0:
            rate = (self.steps - self.warmup) * self.samples_per_step / (time.perf_counter() - self.t0)
            print("fw-rate%s step %d %.3f samples/s" % (self.label, self.steps, rate), flush=True)
