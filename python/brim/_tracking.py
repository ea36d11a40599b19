"""Steps: counting them against the trial's budget, reporting them (lazily on a GPU, see
_timing), and brim.track(), the SDK's wrapper around the training loop's batches."""

import os
import threading
import time
from typing import Any, Callable, Dict, Iterable, Iterator, Optional, Union

from . import _env, _loss, _memory, _metrics, _state
from ._samples import BatchDim
from ._timing import DeviceClock, PendingSteps, Wait

SOURCES = ("sdk", "attach")

clock = DeviceClock()
_pending = PendingSteps()
_current: Dict[str, Any] = {"tracker": None}  # the Tracker whose step is open


def _number(x: Any) -> Optional[float]:
    if x is None:
        return None
    try:
        return float(x)
    except Exception:
        return None


def _int_or_none(x: Any) -> Optional[int]:
    if x is None:
        return None
    try:
        return int(x)
    except Exception:
        return None


SEND_EVERY_S = 0.05  # steps go out in one write at most this often (a write per step costs ~0.1 ms)
_sent_at = {"t": 0.0}
_flush_lock = threading.Lock()
_flusher = {"pid": 0}


def flush(block: bool = False, force: bool = False) -> None:
    """Send the counted steps whose numbers are known, at most every SEND_EVERY_S unless forced
    (all of them with block=True, which waits for the device: only at exit or at the step budget).
    Steps held back go out from a helper thread when no step follows (a pause, an evaluation)."""
    if not len(_pending):
        return
    now = time.monotonic()
    if not (block or force) and now - _sent_at["t"] < SEND_EVERY_S:
        _start_flusher()
        return
    # the training thread never waits here for the helper: what it cannot send now goes out next time
    if not _flush_lock.acquire(blocking=block or force, timeout=1.0 if (block or force) else -1):
        return
    try:
        msgs = _pending.ready(block=block)
        if msgs:
            _sent_at["t"] = time.monotonic()
            _state.send_many(msgs)
    finally:
        _flush_lock.release()


def _start_flusher() -> None:
    if _flusher["pid"] == os.getpid() or _env.channel_path() is None:
        return
    _flusher["pid"] = os.getpid()
    threading.Thread(target=_flush_held, name="brim-flush", daemon=True).start()


def _flush_held() -> None:
    me = os.getpid()
    while _flusher["pid"] == me:
        time.sleep(SEND_EVERY_S)
        try:
            if len(_pending) and time.monotonic() - _sent_at["t"] >= SEND_EVERY_S:
                flush(force=True)
        except Exception:
            pass


def discard_pending() -> None:
    """Forget counted steps not sent yet (a forked child must not send its parent's steps)."""
    global _flush_lock
    _pending.clear()
    _flush_lock = threading.Lock()  # a fork while the helper held it must not leave it held here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=discard_pending)


def steps() -> int:
    """Steps counted in this process so far (all trackers and the attach together)."""
    return _state.state.steps


def sdk_steps() -> int:
    """Steps reported through the SDK in this process (the attach stands back once there is one)."""
    return _state.state.sdk_steps


def stop_reason() -> Optional[str]:
    """Why the job should stop: "budget", "server" (brim asked), or None."""
    return _state.state.stop_reason


def budget_reached() -> bool:
    """True once the process has run BRIM_STEP_BUDGET steps."""
    budget = _env.step_budget()
    return budget is not None and _state.state.steps >= budget


def should_stop() -> bool:
    """True when the job should end its training loop: the step budget is spent or brim asked it
    to stop. brim.track() stops by itself; loops that do not use it can test this."""
    if budget_reached():
        return True
    _state.poll()
    return _state.state.stop_reason is not None


def report_step(samples: Optional[int] = None, wait_s: Optional[float] = None, compute_s: Optional[float] = None,
                micro_batch: Optional[int] = None, accumulation: Optional[int] = None, loss: Any = None,
                warmup: Optional[bool] = None, **extra: Any) -> bool:
    """Report one finished training step and count it. Returns should_stop().

    brim.track() calls this for you; use it directly in loops you cannot wrap (callbacks).

        if brim.report_step(samples=64, loss=float(loss)):
            break
    """
    return count_step(samples=samples, wait_s=wait_s, compute_s=compute_s, micro_batch=micro_batch,
                      accumulation=accumulation, loss=loss, warmup=warmup, extra=extra)


def count_step(samples: Optional[int] = None, wait_s: Optional[float] = None, compute_s: Optional[float] = None,
               micro_batch: Optional[int] = None, accumulation: Optional[int] = None, loss: Any = None,
               warmup: Optional[bool] = None, extra: Optional[Dict[str, Any]] = None, source: str = "sdk",
               wait: Optional[Any] = None, interval_s: Optional[float] = None, at: Optional[float] = None,
               fields: Optional[Dict[str, Any]] = None) -> bool:
    """Count one step and queue its message. `wait` (a lazy data wait) and `interval_s` (the
    step's wall time) replace wait_s/compute_s once the wait is known; `at` is when the step ended
    (default now); `fields` are more top-level message fields (precision, trigger). Returns
    should_stop()."""
    st = _state.state
    index = st.steps
    st.steps += 1
    if source == "sdk":
        st.sdk_steps += 1
    under = _state.active()
    budget = _env.step_budget()
    last = budget is not None and st.steps >= budget
    if under:
        if warmup is None:
            warmup = index < _env.warmup_steps()
        msg: Dict[str, Any] = {
            "type": "step",
            "t": at if at is not None else time.time(),
            "step": index,
            "samples": _int_or_none(samples),
            "wait_s": max(0.0, float(wait_s)) if wait_s is not None else None,
            "compute_s": max(0.0, float(compute_s)) if compute_s is not None else None,
            "warmup": bool(warmup),
            "micro_batch": _int_or_none(micro_batch),
            "accumulation": _int_or_none(accumulation),
            "loss": None if isinstance(loss, _loss.Read) else _number(loss),
            "mem": _memory.snapshot(fresh=last),
            "source": source,
        }
        if fields:
            msg.update(fields)
        if extra:
            msg["extra"] = extra
        # the scalars the job logged since the last counted step (Lightning's self.log, the Trainer's
        # log) go out with this one, whoever counts it (the SDK, or the attach)
        reads: Any = loss if isinstance(loss, _loss.Read) else None
        metrics = _metrics.take()
        if metrics:
            reads = _loss.StepReads(reads, metrics)
        _pending.push(msg, wait, interval_s, reads)
        flush()
    if last:
        if st.stop_reason is None:
            st.stop_reason = "budget"
        if not st.budget_event_sent:
            st.budget_event_sent = True
            flush(block=True)
            _state.event("budget_reached", step=index, budget=budget, steps=st.steps)
        return True
    if under:
        _state.poll()
    return st.stop_reason is not None


SamplesArg = Union[None, int, Callable[[Any], Optional[int]]]


class Tracker:
    """Wraps an iterable of batches; each iteration is one reported step.

    wait_s is the time the loop waited for the batch: on CPU the time inside the wrapped
    iterator's next(), on a CUDA device the time the device had no work queued meanwhile (measured
    with events, never by waiting for the device). compute_s is the rest of the step: wait_s +
    compute_s is the wall time from one next() to the following one. The step is reported when the
    next batch is asked for, when the iterable ends, at close(), or at exit."""

    def __init__(self, iterable: Iterable[Any], samples: SamplesArg = None, warmup: Optional[int] = None):
        self._iterable = iterable
        self._samples = samples
        self._warmup = warmup
        self._dim = BatchDim(getattr(iterable, "batch_size", None))
        self._it: Optional[Iterator[Any]] = None
        self._open: Optional[Dict[str, Any]] = None  # fields of the open step
        self._t_begin = 0.0
        self.steps = 0
        self.stopped_by_budget = False
        self.stopped_by_server = False
        self.exhausted = False

    def __iter__(self) -> "Tracker":
        if self._it is None:
            self._it = iter(self._iterable)
        return self

    def __len__(self) -> int:
        n = len(self._iterable)  # type: ignore[arg-type]
        budget = _env.step_budget()
        if budget is not None:
            n = max(0, min(n, budget - _state.state.steps))
        return n

    def __enter__(self) -> "Tracker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def log(self, **fields: Any) -> None:
        """Add fields to the current step: loss, micro_batch, accumulation, samples, or any other
        JSON-able value (sent under "extra"). Explicit values win over those TrainStep notes."""
        if self._open is not None:
            self._open["explicit"].update(fields)

    def note(self, **fields: Any) -> None:
        """Fields noted by helpers (TrainStep); explicit log() values take precedence."""
        if self._open is not None:
            self._open["noted"].update(fields)

    def _close_step(self, now: float) -> None:
        step, self._open = self._open, None
        if _current["tracker"] is self:
            _current["tracker"] = None
        if step is None:
            return
        fields = dict(step["noted"])
        fields.update(step["explicit"])
        if "samples" not in fields:
            fields["samples"] = step["samples"]
        self.steps += 1
        warmup = None
        if self._warmup is not None:
            warmup = _state.state.steps < self._warmup
        known = {k: fields.pop(k) for k in ("samples", "wait_s", "compute_s", "micro_batch", "accumulation", "loss")
                 if k in fields}
        if "warmup" in fields:
            warmup = fields.pop("warmup")
        wait = step["wait"]
        if "wait_s" in known or "compute_s" in known:
            wait = None
        count_step(extra=fields, warmup=warmup, source="sdk", wait=wait, interval_s=now - self._t_begin, **known)

    def close(self) -> None:
        """Report the open step (if any). Called by the loop's end, `with`, and at exit."""
        if self._open is not None:
            self._close_step(time.perf_counter())
        flush(force=True)

    def _stop(self, reason: str) -> None:
        flush(force=True)
        if reason == "budget":
            self.stopped_by_budget = True
        else:
            self.stopped_by_server = True
        raise StopIteration

    def __next__(self) -> Any:
        if self._it is None:
            self._it = iter(self._iterable)
        under = _state.active()
        st = _state.state
        token = clock.fetch_begin() if under else (time.perf_counter(), None)
        if self._open is not None:
            self._close_step(token[0])
        if st.stop_reason is None:
            if budget_reached():
                st.stop_reason = "budget"
            elif under:
                _state.poll()
        if st.stop_reason is not None:
            self._stop(st.stop_reason)
        try:
            batch = next(self._it)
        except StopIteration:
            self.exhausted = True
            flush(force=True)
            raise
        wait = clock.fetch_end(token) if under else Wait(time.perf_counter() - token[0])
        prev = _current["tracker"]
        if prev is not None and prev is not self:
            prev.close()  # a nested/abandoned tracker: its step ends here
        if self._samples is None:
            samples = self._dim(batch) if under else None
        elif callable(self._samples):
            samples = self._samples(batch)
        else:
            samples = self._samples
        self._open = {"wait": wait, "samples": samples, "noted": {}, "explicit": {}}
        self._t_begin = token[0]
        _current["tracker"] = self
        return batch


def track(iterable: Iterable[Any], samples: SamplesArg = None, warmup: Optional[int] = None) -> Tracker:
    """Wrap the batch iterable of the training loop: one reported step per batch, and the loop
    ends by itself (StopIteration) once the step budget is spent or brim asks it to stop.

    samples: None (the batch dimension, see brim._samples), an int, or a callable batch -> int.
    warmup: steps flagged as warm-up (default BRIM_WARMUP_STEPS).

        for batch in brim.track(loader):
            ...
    """
    return Tracker(iterable, samples=samples, warmup=warmup)


def log(**fields: Any) -> None:
    """Add fields (loss=..., micro_batch=..., accumulation=..., anything JSON-able) to the step
    that is open in the current tracker. No-op without one."""
    cur = _current["tracker"]
    if cur is not None:
        cur.log(**fields)


def note(**fields: Any) -> None:
    """Fields noted by helpers such as TrainStep; explicit log() values take precedence."""
    cur = _current["tracker"]
    if cur is not None:
        cur.note(**fields)


def open_tracker() -> Optional[Tracker]:
    return _current["tracker"]


def reset() -> None:
    """Fresh state (tests)."""
    _pending.clear()
    _sent_at["t"] = 0.0
    _current["tracker"] = None


def at_exit() -> None:
    try:
        cur = _current["tracker"]
        if cur is not None:
            cur.close()
        flush(block=True)
    except Exception:
        pass
