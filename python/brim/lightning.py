"""brim.lightning: a Lightning callback that reports each training step to brim and stops the
trainer at the trial's step budget.

    import brim.lightning
    trainer = lightning.Trainer(callbacks=[brim.lightning.BrimCallback()], ...)

Works with `lightning` (lightning.pytorch) or the older `pytorch_lightning`, whichever is
importable. Tested with Lightning 2.6.6 on an H100 host (issue #15; see docs/sdk.md); in this
repository's CI (no Lightning) tests/test_callbacks.py drives the callback through a stand-in
Trainer that implements only the attributes listed below.

Attributes used: trainer.accumulate_grad_batches, trainer.should_stop; hooks on_train_start,
on_train_batch_start(trainer, module, batch, batch_idx), on_train_batch_end(trainer, module,
outputs, batch, batch_idx). A "step" is one training batch (one micro-batch under accumulation).
"""

from typing import Any

from ._callbacks import StepClock, loss_value
from ._samples import BatchDim


def _import_lightning() -> Any:
    try:
        import lightning.pytorch as pl  # Lightning >= 2.0

        return pl
    except ImportError:
        pass
    try:
        import pytorch_lightning as pl  # older name

        return pl
    except ImportError:
        return None


_pl: Any = _import_lightning()
AVAILABLE = _pl is not None


if _pl is not None:

    class BrimCallback(_pl.Callback):
        """Reports every training batch as a brim step; stops the trainer at the step budget or
        when brim asks to stop."""

        def __init__(self) -> None:
            super().__init__()
            self._clock = StepClock()
            self._dim = BatchDim()

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            self._clock.start()

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int, *args: Any) -> None:
            self._clock.begin()

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int, *args: Any) -> None:
            samples = self._dim(batch)
            stop = self._clock.end(samples=samples, loss=loss_value(outputs), micro_batch=samples,
                                   accumulation=getattr(trainer, "accumulate_grad_batches", None))
            if stop:
                trainer.should_stop = True

else:

    class BrimCallback:  # type: ignore[no-redef]
        """Placeholder: neither `lightning` nor `pytorch_lightning` is importable."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError("brim.lightning.BrimCallback needs `lightning` (or `pytorch_lightning`) installed")
