"""Framework-neutral step timing shared by the Lightning and transformers callbacks."""

import time

import brim


class StepClock:
    """Turns begin/end callbacks into step reports: wait_s = time from the previous step's end to
    this step's begin (mostly the loader; for the first step, from the start of training),
    compute_s = begin to end (after waiting for queued GPU work under brim)."""

    def __init__(self):
        self._last_end = None
        self._begin = None

    def start(self):
        self._last_end = time.perf_counter()

    def begin(self):
        self._begin = time.perf_counter()

    def end(self, samples=None, loss=None, micro_batch=None, accumulation=None, **extra):
        """Report the step; returns brim.should_stop()."""
        if brim.active():
            brim._sync_device()
        now = time.perf_counter()
        begin = self._begin if self._begin is not None else now
        wait = (begin - self._last_end) if self._last_end is not None else None
        self._last_end = now
        self._begin = None
        return brim.report_step(samples=samples, wait_s=wait, compute_s=now - begin, loss=loss,
                                micro_batch=micro_batch, accumulation=accumulation, **extra)


def loss_value(outputs):
    """A float loss from what a training step returned (tensor, dict with "loss", number)."""
    if outputs is None:
        return None
    if isinstance(outputs, dict):
        outputs = outputs.get("loss")
        if outputs is None:
            return None
    try:
        return float(outputs.detach()) if hasattr(outputs, "detach") else float(outputs)
    except Exception:
        return None
