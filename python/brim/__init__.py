"""brim: the in-process SDK of brim. Standard library only.

Under brim (BRIM_CHANNEL in the environment) the calls below report to brim over the channel;
without it they are cheap no-ops and the job runs unchanged. See docs/sdk.md; most jobs need
none of it, brim attaches to them by itself (docs/attach.md).

    import brim
    batch_size = brim.knob("batch_size", default=64)
    for batch in brim.track(loader):      # one reported step per batch; stops at the step budget
        loss = train_step(batch)
        brim.log(loss=loss)
"""

import atexit as _atexit
import os as _os
import signal as _signal
import sys as _sys
import threading as _threading

from . import _env, _state, _tracking
from ._channel import PROTOCOL_VERSION
from ._env import KnobError, knobs, memory_cap_bytes, memory_cap_fraction, run_id, step_budget, warmup_steps
from ._jax import apply_jax_cap
from ._knobs import knob
from ._state import SDK_VERSION as __version__
from ._state import active, event, send
from ._tracking import (Tracker, budget_reached, log, report_step, should_stop, steps, stop_reason, track)

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


def _at_exit() -> None:
    attach = _sys.modules.get("brim._attach")  # only when the attach runs in this process
    if attach is not None:
        attach.at_exit()
    _tracking.at_exit()
    _state.close()


_atexit.register(_at_exit)


def _flush_on_sigterm() -> None:
    """brim stops a job with SIGTERM, whose default action ends the process before atexit runs: send
    the steps still held (at most SEND_EVERY_S of them) first, then end as the default would. Only
    under brim, only in the main thread, and only while the job has no SIGTERM handler of its own
    (one it installs later replaces this)."""
    if _env.channel_path() is None or _threading.current_thread() is not _threading.main_thread():
        return
    try:
        if _signal.getsignal(_signal.SIGTERM) is not _signal.SIG_DFL:
            return

        def on_term(signum: int, frame: object) -> None:
            try:
                _tracking.flush(force=True)
            finally:
                _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
                _os.kill(_os.getpid(), _signal.SIGTERM)

        _signal.signal(_signal.SIGTERM, on_term)
    except (ValueError, OSError):
        pass


_flush_on_sigterm()
