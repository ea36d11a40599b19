"""brim.hf: a transformers TrainerCallback that reports each optimizer step to brim and stops
training at the trial's step budget.

    import brim.hf
    trainer = transformers.Trainer(..., callbacks=[brim.hf.BrimTrainerCallback()])

Tested with transformers 5.17 on an H100 host (issue #15; see docs/sdk.md); in this repository's CI
(no transformers) tests/test_callbacks.py drives the callback through stand-ins for
TrainerCallback, the training arguments, state and control, implementing only what is used here.

A "step" here is one optimizer step of the Trainer (gradient_accumulation_steps micro-batches):
samples = per_device_train_batch_size * gradient_accumulation_steps; wait_s is the time between
the previous step's end and this step's begin, which includes fetching the batches only in
transformers versions that fetch them before on_step_begin. transformers logs the loss (every
logging_steps) after on_step_end, so a step carries the loss logged after an earlier step, once,
and most steps carry none.
"""

from typing import Any, Dict, Optional

from ._callbacks import StepClock


def _import_callback_base() -> Any:
    try:
        from transformers import TrainerCallback

        return TrainerCallback
    except ImportError:
        return None


_Base: Any = _import_callback_base()
AVAILABLE = _Base is not None

if _Base is not None:

    class BrimTrainerCallback(_Base):
        def __init__(self) -> None:
            super().__init__()
            self._clock = StepClock()
            self._loss: Any = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._clock.start()

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._clock.begin()

        def on_log(self, args: Any, state: Any, control: Any, logs: Optional[Dict[str, Any]] = None, **kwargs: Any) -> None:
            if logs and "loss" in logs:
                self._loss = logs["loss"]

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            micro = getattr(args, "per_device_train_batch_size", None)
            accumulation = getattr(args, "gradient_accumulation_steps", None)
            samples = micro * accumulation if micro and accumulation else None
            loss, self._loss = self._loss, None
            if self._clock.end(samples=samples, loss=loss, micro_batch=micro, accumulation=accumulation):
                control.should_training_stop = True
            return control

else:

    class BrimTrainerCallback:  # type: ignore[no-redef]
        """Placeholder: transformers is not importable."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError("brim.hf.BrimTrainerCallback needs `transformers` installed")
