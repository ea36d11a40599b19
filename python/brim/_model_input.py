"""Samples of a step that no DataLoader batch feeds: the batch dimension of what the model sees.

Reinforcement learning (PPO over vectorised environments) trains on slices of rollout tensors, and
many loops slice their own tensors (`x[i:i + B]`, a `get_batch()`): no DataLoader batch tells the
samples. Until one does, a global forward pre-hook on torch modules reads the batch dimension (the
rules of _samples.BatchDim) of the first module call made with gradients on after each backward: the
forward whose loss goes backward next. Calls with gradients off (an RL rollout under `no_grad`,
evaluation) are not looked at. The step adds one such batch per backward outside an optimizer step
(accumulation); the backward calls inside one optimizer step (a closure optimizer such as LBFGS
evaluating the same batch again) count it once.

Nothing here syncs or copies (a shape is host metadata). While torch.compile traces, the hook does
nothing, so it puts no guard on brim's state. It is taken off as soon as a DataLoader batch feeds a
step: a job with a DataLoader pays for it only until its first batch.
"""

from typing import Any, Callable, List, Optional, Tuple

from ._samples import BatchDim, has_tensor


def _never() -> bool:
    return False


def _always() -> bool:
    return True


class ModelInput:
    """The batch of the forward before each backward, read by a global forward pre-hook.

        model_input.install(torch)
        ...                                   # the job's forward, then loss.backward()
        seen, n = model_input.take()          # (True, 64)
    """

    def __init__(self) -> None:
        self.handle: Any = None
        self.dim = BatchDim()
        self.compiling: Callable[[], bool] = _never
        self.grad_enabled: Callable[[], bool] = _always
        self.want = True
        self.pending: Optional[int] = None
        self.seen = False

    def install(self, torch: Any) -> None:
        """Put the hook on (once); nothing when this torch has no global module hooks."""
        if self.handle is not None:
            return
        register = getattr(torch.nn.modules.module, "register_module_forward_pre_hook", None)
        if register is None:
            return
        compiler = getattr(torch, "compiler", None)
        self.compiling = getattr(compiler, "is_compiling", None) or _never
        self.grad_enabled = torch.is_grad_enabled
        self.handle = register(self._hook)

    def off(self) -> None:
        """Take the hook off for good: a DataLoader tells the samples."""
        handle, self.handle = self.handle, None
        self.want = False
        if handle is not None:
            try:
                handle.remove()
            except Exception:
                pass

    def _hook(self, module: Any, args: Tuple[Any, ...]) -> None:
        if not self.want or self.compiling() or not self.grad_enabled():
            return None
        try:
            if not has_tensor(args):
                return None  # kwargs only (model(input_ids=...)): a submodule gets them positionally
            self.pending = self.dim(args)
        except Exception:
            self.pending = None
        self.want = False
        self.seen = True
        return None

    def take(self) -> Tuple[bool, Optional[int]]:
        """At a backward: whether a forward was seen since the last one, and its batch (None when
        unknown); looks for the next forward from here."""
        seen, n = self.seen, self.pending
        self.seen, self.pending = False, None
        self.want = self.handle is not None
        return seen, n


model_input = ModelInput()


class StepSamples:
    """The samples one step's backward calls saw through the model's input."""

    def __init__(self) -> None:
        self.batches = 0
        self.samples: Optional[int] = 0
        self.micro_batch: Optional[int] = None
        self.in_step = False

    def backward(self, inside_step: bool) -> None:
        seen, n = model_input.take()
        if not seen or (inside_step and self.in_step):
            return
        self.in_step = self.in_step or inside_step
        self.batches += 1
        self.micro_batch = n
        self.samples = None if n is None or self.samples is None else self.samples + n


# what the attach told the job's record once: the step's samples came from the model's input
told: List[bool] = [False]
