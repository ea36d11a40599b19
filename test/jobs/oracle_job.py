"""The oracle job: a training loop whose memory and speed curves are known exactly.

Run as `python3 test/jobs/oracle_job.py` with PYTHONPATH=python (standard library + the brim SDK
only). Knobs come from BRIM_KNOBS through brim.knob(); the step budget (BRIM_STEP_BUDGET) ends the
loop. Each step holds BASE + PER_SAMPLE x micro-batch bytes in a touched bytearray (the resident set
really grows) and sleeps for the step time below, so a tuner can be scored against the true best.
The same formulas are in test/tune/oracle.ts (and ported into bench/search-sim.bench.mjs).

    compute   = (OVERHEAD + PER_SAMPLE_TIME x mb x precision time x (1 + PENALTY x max(0, mb - KNEE) / KNEE))
                x workers factor x pin factor  +  OPTIMIZER_TIME / accumulation
    data wait = DATA_S x mb with no loader workers; max(0, DATA_S x mb / w - compute) with w workers
    step time = compute + data wait
    memory    = BASE + precision extra + PER_SAMPLE x precision memory x mb + WORKER_BYTES x num_workers
    workers factor = 1 - WORKER_GAIN x min(w, WORKER_BEST) / WORKER_BEST + WORKER_COST x max(0, w - WORKER_BEST) / WORKER_BEST

DATA_S > 0 is the data-starved mode: the batch is built in the loop (a sleep inside the iterator, so
the SDK measures it as data wait) unless loader workers prepare it during the compute. The precision
speed-up is PRECISIONS' `time` (bf16-mixed 0.7, fp16-mixed 0.75, tf32 0.9); the job reports the
precision in force with each step. Every constant can be overridden with an ORACLE_* environment variable (ORACLE_KNEE=inf for no
knee; ORACLE_PRECISIONS is a JSON object). `--describe` prints the constants (an infinite one as the
string "inf"), the knobs in force and the exact step time, throughput and memory as JSON, and exits
without training. ORACLE_OOM_BYTES:
when the memory a step needs is above it, the job raises MemoryError at its first step (an
out-of-memory crash on demand).
"""

import json
import math
import os
import sys
import time

import brim

MiB = 2**20
SPIN_S = 0.0015

DEFAULTS = {
    "BASE_BYTES": 16 * MiB,
    "PER_SAMPLE_BYTES": 256 * 1024,
    "OVERHEAD_S": 0.008,
    "PER_SAMPLE_S": 0.00035,
    "KNEE": 64.0,
    "PENALTY": 0.5,
    "OPTIMIZER_S": 0.002,
    "WORKER_GAIN": 0.15,
    "WORKER_BEST": 2.0,
    "WORKER_COST": 0.1,
    "WORKER_BYTES": 0,
    "PIN_GAIN": 0.03,
    "OOM_BYTES": None,
    "DATA_S": 0.0,
}

PRECISIONS = {
    "fp32": {"memory": 1.0, "extra_bytes": 0, "time": 1.0},
    "tf32": {"memory": 1.0, "extra_bytes": 0, "time": 0.9},
    "bf16-mixed": {"memory": 0.5, "extra_bytes": 2 * MiB, "time": 0.7},
    "fp16-mixed": {"memory": 0.5, "extra_bytes": 2 * MiB, "time": 0.75},
}


def constants():
    out = {}
    for name, default in DEFAULTS.items():
        raw = os.environ.get("ORACLE_" + name)
        if raw is None or raw == "":
            out[name] = default
        else:
            value = float(raw)
            out[name] = int(value) if name.endswith("_BYTES") and math.isfinite(value) else value
    raw = os.environ.get("ORACLE_PRECISIONS")
    out["PRECISIONS"] = json.loads(raw) if raw else PRECISIONS
    return out


def knobs():
    return {
        "batch_size": brim.knob("batch_size", 8),
        "accumulation": brim.knob("accumulation", 1),
        "num_workers": brim.knob("num_workers", 0),
        "pin_memory": brim.knob("pin_memory", False),
        "precision": brim.knob("precision", "fp32"),
    }


def precision_of(c, name):
    return c["PRECISIONS"].get(name, {"memory": 1.0, "extra_bytes": 0, "time": 1.0})


def data_wait_seconds(c, k):
    fetch = c["DATA_S"] * k["batch_size"]
    if fetch <= 0:
        return 0.0
    w = k["num_workers"]
    return fetch if w <= 0 else max(0.0, fetch / w - compute_seconds(c, k))


def step_seconds(c, k):
    return compute_seconds(c, k) + data_wait_seconds(c, k)


def compute_seconds(c, k):
    mb = k["batch_size"]
    p = precision_of(c, k["precision"])
    knee = c["KNEE"]
    slow = 1 + c["PENALTY"] * max(0.0, mb - knee) / knee if math.isfinite(knee) else 1.0
    w = k["num_workers"]
    best = c["WORKER_BEST"]
    workers = 1 - c["WORKER_GAIN"] * min(w, best) / best + c["WORKER_COST"] * max(0.0, w - best) / best
    pin = 1 - c["PIN_GAIN"] if k["pin_memory"] else 1.0
    return (c["OVERHEAD_S"] + c["PER_SAMPLE_S"] * mb * p["time"] * slow) * workers * pin + c["OPTIMIZER_S"] / max(1, k["accumulation"])


def memory_bytes(c, k):
    p = precision_of(c, k["precision"])
    return int(c["BASE_BYTES"] + p["extra_bytes"] + c["PER_SAMPLE_BYTES"] * p["memory"] * k["batch_size"] + c["WORKER_BYTES"] * k["num_workers"])


def touch(buf):
    # one write per page makes every page resident
    pages = (len(buf) + 4095) // 4096
    buf[::4096] = b"\x01" * pages


def main(argv):
    c = constants()
    k = knobs()
    mb = k["batch_size"]
    acc = max(1, k["accumulation"])
    if mb < 1:
        raise SystemExit("oracle: batch_size must be at least 1, got %r" % (mb,))
    step_s = step_seconds(c, k)
    need = memory_bytes(c, k)
    if "--describe" in argv:
        print(json.dumps({
            "constants": {name: (str(v) if isinstance(v, float) and not math.isfinite(v) else v) for name, v in c.items()},
            "knobs": k,
            "step_seconds": step_s,
            "data_wait_seconds": data_wait_seconds(c, k),
            "optimizer_every": acc,
            "samples_per_second": mb / step_s,
            "memory_bytes": need,
        }, sort_keys=True))
        return 0
    if c["OOM_BYTES"] is not None and need > c["OOM_BYTES"]:
        raise MemoryError("oracle: a step needs %d bytes, more than ORACLE_OOM_BYTES=%d" % (need, c["OOM_BYTES"]))
    buf = bytearray(need)
    touch(buf)
    # the optimizer's cost lands every `acc` micro-batches; its mean share is already in the compute
    wait_s = data_wait_seconds(c, k)
    compute_s = step_s - wait_s - c["OPTIMIZER_S"] / acc
    loss = 2.0
    steps = 0

    def batches():
        # the batch is built here, in the loop: the SDK counts this time as waiting for data
        while True:
            if wait_s > 0:
                time.sleep(wait_s)
            yield mb

    for _ in brim.track(batches(), samples=mb):
        deadline = time.perf_counter() + compute_s + (c["OPTIMIZER_S"] if (steps + 1) % acc == 0 else 0.0)
        touch(buf)
        steps += 1
        # sleep overshoots by a fraction of a millisecond; wait out the last bit so the step time is the curve's
        left = deadline - time.perf_counter()
        if left > SPIN_S:
            time.sleep(left - SPIN_S)
        while time.perf_counter() < deadline:
            pass
        loss *= 0.97
        brim.log(loss=loss, micro_batch=mb, accumulation=acc, precision=k["precision"])
    print("oracle: %d steps of micro-batch %d (accumulation %d), %.1f ms each, %d bytes held" % (steps, mb, acc, step_s * 1000, need), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
