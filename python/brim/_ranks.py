"""Ranks of a distributed job (torchrun, accelerate, DeepSpeed): restart-based recovery from running
out of memory.

A rank must never shrink its micro-batch alone: the others would wait for it in a collective it no
longer joins, or average gradients of different batches. So in a job of two or more ranks, a rank
that runs out of memory tells brim (event "oom_exit", with the knobs it ran with) and exits with
OOM_EXIT_CODE; the launcher ends the other ranks and, with restarts left (torchrun --max-restarts),
starts a new round, whose ranks all read the smaller micro-batch brim wrote to BRIM_KNOBS_FILE.
"""

import atexit
import os
import sys
from typing import Any

from . import _env, _state
from ._wrap import wrap_once

OOM_EXIT_CODE = 75  # EX_TEMPFAIL: worth trying again (with a smaller micro-batch)


def world_size() -> int:
    """Processes in the job as the launcher set it, 1 when it set none."""
    return _env.world_size()


def rank() -> int:
    """This process's global rank as the launcher set it (RANK), 0 when it set none."""
    return _env.rank() or 0


def is_oom(error: BaseException) -> bool:
    """A PyTorch out-of-memory error (torch.OutOfMemoryError / torch.cuda.OutOfMemoryError, or a
    RuntimeError saying so), without importing torch."""
    names = {c.__name__ for c in type(error).__mro__}
    return "OutOfMemoryError" in names or (isinstance(error, RuntimeError) and "out of memory" in str(error).lower())


def _exit_on_oom(kind: Any, error: BaseException, tb: Any, original: Any = sys.excepthook) -> None:
    """The excepthook: the traceback as before, then, for an out-of-memory error, the event and the
    exit code. The code is set at exit, not here: torch.distributed's own hook (installed by
    init_process_group over this one) collects what this hook writes and prints it after it returns."""
    original(kind, error, tb)
    if not is_oom(error):
        return
    atexit.register(os._exit, OOM_EXIT_CODE)  # runs first (last registered): after the traceback is out
    try:
        from . import _tracking

        attach = sys.modules.get("brim._attach")  # count the step the attach still holds
        if attach is not None:
            attach.at_exit()
        _tracking.at_exit()
        _state.event("oom_exit", message="this rank ran out of memory: it exits with code %d so that every rank restarts "
                     "with a smaller micro-batch" % OOM_EXIT_CODE, step=_state.state.steps,
                     rank=_env.rank(), knobs=_env.knobs(), exit_code=OOM_EXIT_CODE)
        _state.close()
        sys.stderr.write("brim: rank %s ran out of memory at step %d; exit code %d: brim gives every rank of the next round "
                         "a smaller micro-batch (torchrun --max-restarts)\n"
                         % (_env.rank() if _env.rank() is not None else "?", _state.state.steps, OOM_EXIT_CODE))
    except Exception:
        pass


def _patch_init_process_group(torch: Any) -> None:
    """A launcher that does not set RANK (Lightning's own DDP: the script is rank 0 and starts the
    others with LOCAL_RANK / NODE_RANK only) leaves the hello without a rank; once the process group
    exists its rank is known: tell brim (event "rank_known"), so that the job's steps are counted
    once and its samples/s summed over the ranks."""
    dist: Any = getattr(torch, "distributed", None)

    def wrap_init(original: Any) -> Any:
        def init_with_brim(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            if _env.rank() is None:
                try:
                    _state.event("rank_known", rank=int(dist.get_rank()), world_size=int(dist.get_world_size()),
                                 local_rank=_env.local_rank())
                except Exception:
                    pass
            return out

        return init_with_brim

    if dist is not None:
        wrap_once(dist, "init_process_group", wrap_init)


def install() -> bool:
    """In a rank of a job of two or more, end the process with OOM_EXIT_CODE on an uncaught
    out-of-memory error. Returns whether it was installed."""
    if world_size() < 2 or _env.channel_path() is None:
        return False
    original = sys.excepthook
    sys.excepthook = lambda kind, error, tb: _exit_on_oom(kind, error, tb, original)
    return True
