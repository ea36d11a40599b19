"""The loss of an unmodified job, read without waiting for the device.

The attach sees every `Tensor.backward()`. A scalar tensor going backward is the job's loss:
brim keeps a detached reference to it (no copy, no read) and, when the step is counted, reads it
only once its value exists without waiting:

- on the CPU the value is there as soon as backward() returns: it is read when the step goes out;
- on a CUDA device, at the end of the step brim queues a copy into a small pinned host buffer
  (`copy_(non_blocking=True)`) and an event after it; the value is read once the event has
  completed (`query()`, which never waits), so a step's loss goes out a little later, like its
  data wait (see _timing). Only at exit or at the step budget does brim wait for the last ones;
- on other devices (XLA, MPS) reading would force the device to finish its queued work: the loss
  stays null there.

Mixed precision scales the loss before backward (`GradScaler.scale(loss).backward()`, also what
Lightning and accelerate do for fp16): brim records the loss as it was before scaling. With
gradient accumulation (several backward() in one optimizer step) the step's loss is the sum of
the losses that went backward: the mean loss of the step's batches for jobs that divide each
micro-batch's loss by the accumulation, as Lightning, the Hugging Face Trainer, accelerate's
examples and nanoGPT do (a job that does not divide reports the sum).

BRIM_LOSS=0 turns the read off (the loss is then null, as before brim read it): the switch the
loss-read bench compares with (bench/loss-read.bench.py).
"""

import math
import sys
from typing import Any, Dict, List, Optional

from . import _env
from ._wrap import wrap_once

ENABLED = _env.switched_on(_env.ENV_LOSS)
_seen: Dict[str, Any] = {"tensor": None, "scaled": None, "unscaled": None}
_pinned: Dict[Any, List[Any]] = {}


class Read:
    """One step's loss: ready() never waits; value(block=True) waits (only at exit/budget)."""

    __slots__ = ("_tensor", "_event", "_buffer", "_value", "_done")

    def __init__(self, tensor: Any = None, event: Any = None, buffer: Any = None, value: Optional[float] = None):
        self._tensor = tensor
        self._event = event
        self._buffer = buffer
        self._value = value
        self._done = tensor is None and event is None

    def ready(self) -> bool:
        if self._done:
            return True
        if self._event is None:
            return True
        try:
            return bool(self._event.query())
        except Exception:
            self._give_up()
            return True

    def value(self, block: bool = False) -> Optional[float]:
        if not self._done and self._event is not None and not self.ready():
            if not block:
                return None
            try:
                self._event.synchronize()
            except Exception:
                self._give_up()
        if not self._done:
            source = self._buffer if self._buffer is not None else self._tensor
            try:
                self._value = float(source)  # non-finite values: the channel writes them as words
            except Exception:
                self._value = None
            self._release()
        return self._value

    def fill(self, fields: Dict[str, Any]) -> None:
        """Puts the value into a step message (waits only where value(block=True) does)."""
        fields["loss"] = self.value(block=True)

    def _give_up(self) -> None:
        self._value = None
        self._release()

    def _release(self) -> None:
        if self._buffer is not None:
            pool = _pinned.setdefault(self._buffer.dtype, [])
            if len(pool) < 64:
                pool.append(self._buffer)
        self._tensor = self._event = self._buffer = None
        self._done = True


def seen(tensor: Any, args: Any = (), kwargs: Any = None) -> None:
    """Called by the attach as a tensor goes backward: keep it when it is a scalar (the loss)."""
    if not ENABLED:
        return
    try:
        if (args and args[0] is not None) or (kwargs and kwargs.get("gradient") is not None):
            return  # backward(gradient): not a loss
        if tensor.dim() != 0 and tensor.numel() != 1:
            return
        if _seen["scaled"] is not None and _seen["scaled"] is tensor:
            tensor = _seen["unscaled"]
        loss = tensor.detach()
        before = _seen["tensor"]
        # several backward() in one step (accumulation): their sum, one queued add, no read
        _seen["tensor"] = loss if before is None else before + loss.to(before.dtype)
    except Exception:
        return
    finally:
        _seen["scaled"] = _seen["unscaled"] = None


def take() -> Optional[Read]:
    """At the end of a step: the loss that went backward in it, as a Read (None when none was seen)."""
    tensor, _seen["tensor"] = _seen["tensor"], None
    if tensor is None:
        return None
    return read_of(tensor)


class StepReads:
    """A step's lazy reads: its loss and the job's own logged scalars (brim._metrics), with Read's
    ready()/fill(); fill() adds the scalars to the message's `extra`."""

    __slots__ = ("loss", "metrics")

    def __init__(self, loss: Optional[Read], metrics: Dict[str, Any]):
        self.loss = loss
        self.metrics = metrics

    def ready(self) -> bool:
        if self.loss is not None and not self.loss.ready():
            return False
        return all(r.ready() for r in self.metrics.values() if isinstance(r, Read))

    def fill(self, fields: Dict[str, Any]) -> None:
        if self.loss is not None:
            self.loss.fill(fields)
        values = {}
        for name, r in self.metrics.items():
            v = r.value(block=True) if isinstance(r, Read) else r
            if isinstance(v, float) and math.isfinite(v):
                values[name] = v
        if values:
            fields["extra"] = dict(fields.get("extra") or {}, **values)


def read_of(tensor: Any) -> Optional[Read]:
    """A scalar tensor's value, read without waiting for the device (see the module's text)."""
    try:
        kind = tensor.device.type
        if kind == "cpu":
            return Read(tensor=tensor)
        if kind != "cuda":
            return None
        torch = sys.modules["torch"]
        pool = _pinned.get(tensor.dtype)
        buffer = pool.pop() if pool else torch.empty((), dtype=tensor.dtype, pin_memory=True)
        buffer.copy_(tensor.reshape(()), non_blocking=True)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(tensor.device))  # the stream the copy went on
        return Read(event=event, buffer=buffer)
    except Exception:
        return None


def reset() -> None:
    _seen["tensor"] = _seen["scaled"] = _seen["unscaled"] = None


def _wrap_scale(scale: Any) -> Any:
    def scale_with_brim(self: Any, outputs: Any) -> Any:
        out = scale(self, outputs)
        _seen["scaled"], _seen["unscaled"] = out, outputs
        return out

    return scale_with_brim


def _patch_scaler(torch: Any) -> None:
    """Remember what GradScaler.scale was given, so that the loss is recorded unscaled."""
    classes = []
    for owner in (getattr(torch, "amp", None), getattr(torch.cuda, "amp", None)):
        cls = getattr(owner, "GradScaler", None) if owner is not None else None
        if cls is not None and cls not in classes:
            classes.append(cls)
    for cls in classes:
        if "scale" in cls.__dict__:  # its own, not a base class's
            wrap_once(cls, "scale", _wrap_scale)
