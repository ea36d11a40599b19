"""brim.torch: PyTorch helpers of the brim SDK (torch 1.13 and 2.x, CPU and CUDA).

Importing this module imports torch; `import brim` alone never does.

    import brim, brim.torch as bt
    bt.apply_cap()                                   # BRIM_MEMORY_CAP_BYTES -> allocator limit
    loader = DataLoader(ds, batch_size=brim.knob("batch_size", 32), **bt.loader_kwargs())
    step = bt.TrainStep(model, opt, loss_fn, precision=brim.knob("precision", "fp32"),
                        accumulation=brim.knob("accumulation", 1))
    for batch in brim.track(loader):
        loss = step(batch)                          # OOM inside the step: split, retry, report
"""

import torch as _torch  # noqa: F401  (fail early and clearly when torch is missing)

import brim as _brim
from brim import _state as _brim_state

from ._profile import profile
from ._setup import apply_cap, configure, loader_kwargs
from ._step import PRECISIONS, OOMFatalError, TrainStep
from ._util import batch_size, is_oom_error, make_oom_error, oom_error_type, split_batch, to_device

__all__ = [
    "TrainStep",
    "OOMFatalError",
    "PRECISIONS",
    "profile",
    "apply_cap",
    "configure",
    "loader_kwargs",
    "to_device",
    "batch_size",
    "split_batch",
    "is_oom_error",
    "oom_error_type",
    "make_oom_error",
]

# The channel's hello names the frameworks imported when it connected; tell brim about torch if
# the channel was opened before torch was imported.
if _brim_state.connected():
    _brim.event("framework_loaded", name="torch", version=str(_torch.__version__))
