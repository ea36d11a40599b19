"""Framework-neutral step timing shared by the Lightning and transformers callbacks."""

import time
from typing import Any, Optional, Tuple

from . import _tracking
from ._timing import Wait


class StepClock:
    """Turns begin/end callbacks into step reports. A step's wall time runs from the previous
    step's end (for the first, from the start of training) to its own end; wait_s is the part
    before its begin (mostly the loader) in which the device had no work queued (the host time on
    CPU), compute_s the rest. Nothing here waits for the device."""

    def __init__(self) -> None:
        self._token: Optional[Tuple[float, Any]] = None
        self._wait: Optional[Wait] = None
        self._begin: Optional[float] = None

    def start(self) -> None:
        self._token = _tracking.clock.fetch_begin()

    def begin(self) -> None:
        if self._token is not None:
            self._wait = _tracking.clock.fetch_end(self._token)
        self._begin = time.perf_counter()

    def end(self, samples: Optional[int] = None, loss: Any = None, micro_batch: Optional[int] = None,
            accumulation: Optional[int] = None, **extra: Any) -> bool:
        """Report the step; returns brim.should_stop()."""
        token = _tracking.clock.fetch_begin()
        now = token[0]
        begin = self._begin if self._begin is not None else now
        start = self._token[0] if self._token is not None else begin
        wait, self._wait = self._wait, None
        self._token = token
        self._begin = None
        return _tracking.count_step(samples=samples, loss=loss, micro_batch=micro_batch, accumulation=accumulation,
                                    extra=extra, source="sdk", wait=wait,
                                    interval_s=now - start if wait is not None else None,
                                    compute_s=now - begin if wait is None else None)


def loss_value(outputs: Any) -> Optional[float]:
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
