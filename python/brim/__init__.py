"""brim: the in-process SDK of brim (https://github.com/.../brim). Standard library only.

Under brim (BRIM_CHANNEL in the environment) the calls below report to brim over the channel;
without it they are cheap no-ops and the job runs unchanged. See docs/sdk.md.

    import brim
    batch_size = brim.knob("batch_size", default=64)
    for batch in brim.track(loader):      # one reported step per batch; stops at the step budget
        loss = train_step(batch)
        brim.log(loss=loss)
"""

import atexit
import os
import sys
import time

from . import _env
from ._channel import PROTOCOL_VERSION, Channel
from ._env import KnobError, knobs, memory_cap_bytes, memory_cap_fraction, run_id, step_budget, warmup_steps

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "PROTOCOL_VERSION",
    "KnobError",
    "active",
    "knob",
    "knobs",
    "step_budget",
    "warmup_steps",
    "memory_cap_bytes",
    "memory_cap_fraction",
    "run_id",
    "track",
    "Tracker",
    "log",
    "report_step",
    "event",
    "send",
    "steps",
    "budget_reached",
    "should_stop",
    "stop_reason",
    "apply_jax_cap",
]


# ---------------------------------------------------------------------------------------------
# process state


class _State:
    def __init__(self):
        self.channel = None  # Channel, created on first use when BRIM_CHANNEL is set
        self.channel_path = None
        self.steps = 0  # steps reported by this process (all trackers together)
        self.stop_reason = None  # "budget" | "server" (a stop request from brim)
        self.budget_event_sent = False
        self.current = None  # the Tracker whose step is open
        self.shrink_requests = 0
        self.knobs_reported = set()


_state = _State()


def _after_fork_in_child():
    if _state.channel is not None:
        _state.channel.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _get_channel():
    """The process's channel, or None when not under brim. Re-reads BRIM_CHANNEL (cheap)."""
    path = _env.channel_path()
    if path is None:
        return None
    if _state.channel is None or _state.channel_path != path:
        if _state.channel is not None:
            _state.channel.close()
        _state.channel = Channel(path, __version__)
        _state.channel_path = path
    return _state.channel


def active():
    """True when the job runs under brim (BRIM_CHANNEL is set)."""
    return _env.channel_path() is not None


def send(msg):
    """Send one raw message (a dict with "type"; "v", "t" and "pid" are filled in). False when
    not under brim or the channel is down. Never raises for channel problems."""
    ch = _get_channel()
    if ch is None:
        return False
    full = {"v": PROTOCOL_VERSION, "type": msg.get("type"), "t": time.time(), "pid": os.getpid()}
    full.update(msg)
    ok = ch.send(full)
    if ok:
        _poll(ch)
    return ok


def _poll(ch=None):
    ch = ch or (_state.channel if _env.channel_path() else None)
    if ch is None:
        return
    for msg in ch.poll():
        kind = msg.get("type")
        if kind == "stop":
            if _state.stop_reason is None:
                _state.stop_reason = "server"
        elif kind == "shrink":
            _state.shrink_requests += 1
        # unknown request types are ignored: the server may be newer than this SDK


def _take_shrink_requests():
    """Used by brim.torch.TrainStep: how many shrink requests arrived since the last call."""
    _poll()
    n, _state.shrink_requests = _state.shrink_requests, 0
    return n


def event(kind, message=None, step=None, **details):
    """Report an event (e.g. "oom_recovered") with free-form details. No-op when not under brim."""
    if not active():
        return False
    return send(
        {
            "type": "event",
            "kind": str(kind),
            "step": step,
            "message": message,
            "details": details,
        }
    )


# ---------------------------------------------------------------------------------------------
# knobs


def knob(name, default):
    """The current trial's value of knob `name` (from BRIM_KNOBS), cast to the type of
    `default`; `default` when the knob is absent or null. Raises KnobError when the value cannot
    be cast (a trial must not silently run with the default). Works without a channel too, so a
    job can be driven by hand: BRIM_KNOBS='{"batch_size": 128}' python train.py"""
    values = knobs()
    if name not in values or values[name] is None:
        value, source = default, "default"
    else:
        value, source = _env.cast_knob(name, values[name], default), "knobs"
    if name not in _state.knobs_reported and active():
        _state.knobs_reported.add(name)
        event("knob_read", name=name, value=value, default=default, source=source)
    return value


# ---------------------------------------------------------------------------------------------
# steps


def steps():
    """Steps reported by this process so far (all trackers together)."""
    return _state.steps


def stop_reason():
    """Why the job should stop: "budget", "server" (brim asked), or None."""
    return _state.stop_reason


def budget_reached():
    """True once the process has run BRIM_STEP_BUDGET steps."""
    budget = step_budget()
    return budget is not None and _state.steps >= budget


def should_stop():
    """True when the job should end its training loop: the step budget is spent or brim asked it
    to stop. brim.track() stops by itself; loops that do not use it can test this."""
    if budget_reached():
        return True
    _poll()
    return _state.stop_reason is not None


def _memory():
    mem = {}
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            cuda = torch.cuda
            if cuda.is_available() and cuda.is_initialized():
                dev = cuda.current_device()
                mem["device"] = "cuda:%d" % dev
                mem["allocated"] = int(cuda.memory_allocated(dev))
                mem["reserved"] = int(cuda.memory_reserved(dev))
                mem["peak"] = int(cuda.max_memory_allocated(dev))
                mem["peak_reserved"] = int(cuda.max_memory_reserved(dev))
        except Exception:
            mem = {}
    mem.setdefault("device", "cpu")
    try:
        with open("/proc/self/statm", "rb") as f:
            mem["rss"] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except Exception:
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        mem["peak_rss"] = int(peak if sys.platform == "darwin" else peak * 1024)
    except Exception:
        pass
    return mem


def _sync_device():
    """Wait for queued GPU work so that compute time is the real time (only under brim)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception:
        pass


def _number(x):
    if x is None:
        return None
    try:
        return float(x)
    except Exception:
        return None


def _int_or_none(x):
    if x is None:
        return None
    try:
        return int(x)
    except Exception:
        return None


def report_step(samples=None, wait_s=None, compute_s=None, micro_batch=None, accumulation=None, loss=None,
                warmup=None, **extra):
    """Report one finished training step and count it. Returns should_stop().

    brim.track() calls this for you; use it directly in loops you cannot wrap (callbacks)."""
    index = _state.steps
    _state.steps += 1
    under = active()
    if under:
        if warmup is None:
            warmup = index < warmup_steps()
        msg = {
            "type": "step",
            "step": index,
            "samples": _int_or_none(samples),
            "wait_s": max(0.0, float(wait_s)) if wait_s is not None else None,
            "compute_s": max(0.0, float(compute_s)) if compute_s is not None else None,
            "warmup": bool(warmup),
            "micro_batch": _int_or_none(micro_batch),
            "accumulation": _int_or_none(accumulation),
            "loss": _number(loss),
            "mem": _memory(),
        }
        if extra:
            msg["extra"] = extra
        send(msg)
    budget = step_budget()
    if budget is not None and _state.steps >= budget:
        if _state.stop_reason is None:
            _state.stop_reason = "budget"
        if not _state.budget_event_sent:
            _state.budget_event_sent = True
            event("budget_reached", step=index, budget=budget, steps=_state.steps)
        return True
    if under:
        _poll()
    return _state.stop_reason is not None


def _batch_samples(batch, depth=0):
    """Samples in a batch: the first dimension of the first tensor-like found, else the length of
    the first sequence of plain values. None when unknown."""
    if depth > 6:
        return None
    shape = getattr(batch, "shape", None)
    if shape is not None:
        try:
            return int(shape[0]) if len(shape) >= 1 else 1
        except Exception:
            return None
    if isinstance(batch, dict) or (hasattr(batch, "keys") and hasattr(batch, "__getitem__")):
        try:
            values = [batch[k] for k in batch.keys()]
        except Exception:
            return None
        for v in values:
            n = _batch_samples(v, depth + 1)
            if n is not None:
                return n
        return None
    if isinstance(batch, (list, tuple)):
        if not batch:
            return 0
        if all(getattr(v, "shape", None) is None and not isinstance(v, (list, tuple, dict)) for v in batch):
            return len(batch)  # a list of plain samples (strings, numbers, ...)
        for v in batch:
            n = _batch_samples(v, depth + 1)
            if n is not None:
                return n
        return None
    return None


class Tracker:
    """Wraps an iterable of batches; each iteration is one reported step.

    wait_s is the time spent inside the wrapped iterator's next() (waiting for data); compute_s
    the time from the end of that next() to the start of the following one (the loop body, after
    waiting for queued GPU work under brim). The step is reported when the next batch is asked
    for, when the iterable ends, at close(), or at exit."""

    def __init__(self, iterable, samples=None, warmup=None):
        self._iterable = iterable
        self._samples = samples
        self._warmup = warmup
        self._it = None
        self._open = None  # fields of the open step
        self._t_got = 0.0
        self.steps = 0
        self.stopped_by_budget = False
        self.stopped_by_server = False
        self.exhausted = False

    def __iter__(self):
        if self._it is None:
            self._it = iter(self._iterable)
        return self

    def __len__(self):
        n = len(self._iterable)
        budget = step_budget()
        if budget is not None:
            n = max(0, min(n, budget - _state.steps))
        return n

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def log(self, **fields):
        """Add fields to the current step: loss, micro_batch, accumulation, samples, or any other
        JSON-able value (sent under "extra"). Explicit values win over those TrainStep notes."""
        if self._open is not None:
            self._open["explicit"].update(fields)

    def _note(self, **fields):
        if self._open is not None:
            self._open["noted"].update(fields)

    def _close_step(self, now):
        step, self._open = self._open, None
        if _state.current is self:
            _state.current = None
        if step is None:
            return
        fields = dict(step["noted"])
        fields.update(step["explicit"])
        if "samples" not in fields:
            fields["samples"] = step["samples"]
        self.steps += 1
        warmup = None
        if self._warmup is not None:
            warmup = _state.steps < self._warmup
        fields.setdefault("wait_s", step["wait_s"])
        fields.setdefault("compute_s", now - self._t_got)
        fields.setdefault("warmup", warmup)
        report_step(**fields)

    def close(self):
        """Report the open step (if any). Called by the loop's end, `with`, and at exit."""
        if self._open is not None:
            if active():
                _sync_device()
            self._close_step(time.perf_counter())

    def _stop(self, reason):
        if reason == "budget":
            self.stopped_by_budget = True
        else:
            self.stopped_by_server = True
        raise StopIteration

    def __next__(self):
        if self._it is None:
            self._it = iter(self._iterable)
        under = active()
        if self._open is not None:
            if under:
                _sync_device()
            self._close_step(time.perf_counter())
        if _state.stop_reason is None:
            if budget_reached():
                _state.stop_reason = "budget"
            elif under:
                _poll()
        if _state.stop_reason is not None:
            self._stop(_state.stop_reason)
        t0 = time.perf_counter()
        try:
            batch = next(self._it)
        except StopIteration:
            self.exhausted = True
            raise
        t1 = time.perf_counter()
        prev = _state.current
        if prev is not None and prev is not self:
            prev.close()  # a nested/abandoned tracker: its step ends here
        if self._samples is None:
            samples = _batch_samples(batch) if under else None
        elif callable(self._samples):
            samples = self._samples(batch)
        else:
            samples = self._samples
        self._open = {"wait_s": t1 - t0, "samples": samples, "noted": {}, "explicit": {}}
        self._t_got = t1
        _state.current = self
        return batch


def track(iterable, samples=None, warmup=None):
    """Wrap the batch iterable of the training loop: one reported step per batch, and the loop
    ends by itself (StopIteration) once the step budget is spent or brim asks it to stop.

    samples: None (first dimension of the first tensor in the batch), an int, or a callable
    batch -> int. warmup: steps flagged as warm-up (default BRIM_WARMUP_STEPS)."""
    return Tracker(iterable, samples=samples, warmup=warmup)


def log(**fields):
    """Add fields (loss=..., micro_batch=..., accumulation=..., anything JSON-able) to the step
    that is open in the current tracker. No-op without one."""
    cur = _state.current
    if cur is not None:
        cur.log(**fields)


def _note(**fields):
    """Fields noted by helpers such as TrainStep; explicit log() values take precedence."""
    cur = _state.current
    if cur is not None:
        cur._note(**fields)


# ---------------------------------------------------------------------------------------------
# JAX memory cap (must run before JAX initialises its backend)


def apply_jax_cap(fraction=None):
    """Set XLA_PYTHON_CLIENT_PREALLOCATE=false and XLA_PYTHON_CLIENT_MEM_FRACTION from
    BRIM_MEMORY_CAP_FRACTION (or `fraction`) unless already set. Returns the variables set. Must
    run before JAX touches the GPU; brim's job runner normally sets them itself."""
    out = {}
    if fraction is None:
        fraction = memory_cap_fraction()
    if "jax" in sys.modules:
        _env.warn_once("jax-cap", "apply_jax_cap() called after jax was imported; it may have no effect")
    if "XLA_PYTHON_CLIENT_PREALLOCATE" not in os.environ:
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        out["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if fraction is not None and "XLA_PYTHON_CLIENT_MEM_FRACTION" not in os.environ:
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "%.4f" % fraction
        out["XLA_PYTHON_CLIENT_MEM_FRACTION"] = os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"]
    if out:
        event("cap_applied", framework="jax", env=out)
    return out


def _at_exit():
    try:
        cur = _state.current
        if cur is not None:
            cur.close()
    except Exception:
        pass
    ch = _state.channel
    if ch is not None:
        ch.close()


atexit.register(_at_exit)
