"""The job's own logged scalars with no code change: Lightning's `self.log` in training and the
Hugging Face Trainer's `log`, recorded in the step message's `extra` beside brim's own figures.

A logged value is kept as it is given: a Python number, or a detached reference to a scalar
tensor, read when the step goes out the way the loss is (brim._loss.read_of: on a CUDA device a
non-blocking copy and an event, never a wait in the training thread). Lightning's values logged in
a training step go out with that step; the Trainer logs after its optimizer step, so its values go
out with the next step brim counts. Values logged outside training (validation) are left out.
BRIM_METRICS=0 turns this off.
"""

import sys
from typing import Any, Dict

from . import _env, _loss
from ._import_hook import OnImport
from ._wrap import wrap_once

ENABLED = _env.switched_on(_env.ENV_METRICS)
#: at most this many names a run (a job logging per-layer figures must not flood the channel)
MAX_NAMES = 32
#: the Trainer's end-of-training summary, not a per-step figure
_TRAINER_SUMMARY = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss"}

_pending: Dict[str, Any] = {}
_names: Dict[str, None] = {}


def note(name: str, value: Any) -> None:
    """Keeps a scalar the job logged in this step (no read of a tensor here)."""
    if not ENABLED or isinstance(value, bool):
        return
    if name not in _names:
        if len(_names) >= MAX_NAMES:
            return
        _names[name] = None
    if isinstance(value, (int, float)):
        _pending[name] = float(value)
        return
    try:
        if value.numel() != 1:
            return
        _pending[name] = value.detach()
    except Exception:
        return


def take() -> Dict[str, Any]:
    """At the end of a step: the scalars logged in it, tensors as lazy reads (brim._loss.Read)."""
    if not _pending:
        return {}
    out: Dict[str, Any] = {}
    for name, value in _pending.items():
        read = value if isinstance(value, float) else _loss.read_of(value)
        if read is not None:
            out[name] = read
    _pending.clear()
    return out


def _lightning_log(original: Any) -> Any:
    def log_with_brim(self: Any, name: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, name, value, *args, **kwargs)
        try:
            trainer = getattr(self, "_trainer", None)
            if trainer is not None and getattr(trainer, "training", False):
                note(str(name), value)
        except Exception:
            pass
        return out

    return log_with_brim


def _trainer_log(original: Any) -> Any:
    def log_with_brim(self: Any, logs: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            for name, value in dict(logs).items():
                if name not in _TRAINER_SUMMARY and isinstance(value, (int, float)):
                    note(str(name), value)
        except Exception:
            pass
        return original(self, logs, *args, **kwargs)

    return log_with_brim


def _patch_lightning(module: Any) -> None:
    cls = getattr(module, "LightningModule", None)
    if cls is not None:
        wrap_once(cls, "log", _lightning_log)


def _patch_trainer(module: Any) -> None:
    cls = getattr(module, "Trainer", None)
    if cls is not None:
        wrap_once(cls, "log", _trainer_log)


_TARGETS = (
    ("lightning.pytorch.core.module", _patch_lightning),
    ("pytorch_lightning.core.module", _patch_lightning),
    ("transformers.trainer", _patch_trainer),
)


def install() -> None:
    """Patches the frameworks already imported; waits for the others' import."""
    if not ENABLED:
        return
    for name, patch in _TARGETS:
        module = sys.modules.get(name)
        if module is not None:
            try:
                patch(module)
            except Exception:
                pass
        else:
            sys.meta_path.insert(0, OnImport(name, _guarded(patch)))


def _guarded(patch: Any) -> Any:
    def run(module: Any) -> None:
        try:
            patch(module)
        except Exception:
            pass

    return run
