"""Samples of a step that no DataLoader batch feeds: the batch dimension of what the model sees.

Reinforcement learning (PPO over vectorised environments) trains on slices of rollout tensors, and
many loops slice their own tensors (`x[i:i + B]`, a `get_batch()`): no DataLoader batch tells the
samples. Until one does, a global forward pre-hook on torch modules reads the batch dimension (the
rules of _samples.BatchDim) of the first call of a module with parameters made with gradients on after
each backward: the forward whose loss goes backward next (a layer with nothing to train called on the
way, a padding of the loader's series before windows are drawn from them, is not the model). Calls with gradients off (an RL rollout under `no_grad`,
evaluation) are not looked at. The step adds one such batch per backward outside an optimizer step
(accumulation); the backward calls inside one optimizer step (a closure optimizer such as LBFGS
evaluating the same batch again) count it once.

Nothing here syncs or copies (a shape is host metadata). While torch.compile traces, the hook does
nothing, so it puts no guard on brim's state. Where DataLoader batches feed the steps, it stays on for
their first few (the step state puts its count beside the loader's, `extra.model_samples`: a library
that draws its model batch from the loader's, windows from series, says so there) and is then taken
off; one that a compiled graph was traced with stays on, doing nothing, since removing a global hook
makes torch.compile trace that graph again.
"""

import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ._samples import BatchDim, has_tensor


def _never() -> bool:
    return False


def _always() -> bool:
    return True


def _trains(module: Any) -> bool:
    """Whether the module holds a parameter (its own or a submodule's)."""
    try:
        return next(iter(module.parameters()), None) is not None
    except Exception:
        return True


def _put_hook(owner: Any, torch: Any) -> bool:
    """Put `owner._hook` on every module's forward (once), with the torch checks it reads; False when
    it was on already or this torch has no global module hooks."""
    if owner.handle is not None:
        return False
    register = getattr(torch.nn.modules.module, "register_module_forward_pre_hook", None)
    if register is None:
        return False
    compiler = getattr(torch, "compiler", None)
    owner.compiling = getattr(compiler, "is_compiling", None) or _never
    owner.grad_enabled = torch.is_grad_enabled
    owner.handle = register(owner._hook)
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
        self.live = False  # on and reading
        self.traced = False  # a torch.compile graph was traced with the hook on
        self.pending: Optional[int] = None
        self.seen = False

    def install(self, torch: Any) -> None:
        """Put the hook on (once); nothing when this torch has no global module hooks."""
        if _put_hook(self, torch):
            self.live = True
            token_input.install(torch)

    def off(self) -> None:
        """Stop reading for good: a DataLoader tells the samples. The hook is taken off, unless a
        compiled graph was traced with it (taking it off would make torch.compile trace that graph
        again): that one stays on and does nothing."""
        self.live = False
        self.want = False
        if self.traced:
            return
        handle, self.handle = self.handle, None
        if handle is not None:
            try:
                handle.remove()
            except Exception:
                pass

    def _hook(self, module: Any, args: Tuple[Any, ...]) -> None:
        if self.compiling():
            self.traced = True
            return None
        if not self.want or not self.grad_enabled() or not _trains(module):
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
        self.want = self.live
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


# -- the tokens a loss is averaged over ------------------------------------------------------------

IGNORE_INDEX = -100
_MAX_READS = 64
_MAX_LOOKS = 20000
_MODULE_FILE = ("torch", "nn", "modules", "module.py")


def _call_kwargs() -> Optional[Dict[str, Any]]:
    """The keyword arguments of the module call whose forward pre-hooks run now: torch's global
    pre-hooks get the positional ones only, so they are read from the frame of torch's module call
    (`_call_impl`, or its `inner` closure in torch 2.x) that called the hook."""
    frame: Any = sys._getframe(2)
    for _ in range(3):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_filename.replace("\\", "/").endswith("/".join(_MODULE_FILE)):
            kwargs = frame.f_locals.get("kwargs")
            return kwargs if isinstance(kwargs, dict) else None
        frame = frame.f_back
    return None


def _batch_of(args: Tuple[Any, ...]) -> Optional[Any]:
    """A mapping passed as the call's one positional argument (`model(batch)`), else None."""
    if len(args) == 1 and isinstance(args[0], Mapping):
        return args[0]
    return None


class TokenInput:
    """The tokens each micro-batch's loss is averaged over, before the first optimizer step.

    A global forward pre-hook finds the model as the first module called with gradients on and a
    batch of `labels` or `attention_mask` (by keyword, `model(**batch)`, or one mapping), and for
    each of its calls keeps the tokens of each row: the labels that are not the ignore index -100,
    else the attention mask's ones. The counts stay on the batch's device (no sync) until the first
    optimizer step reads them once (take()); the hook is then taken off. Whether the call carries
    `num_items_in_batch` (the Hugging Face Trainer's count of the whole step's tokens, passed to a
    model whose loss takes it) is kept too.

        token_input.install(torch)
        ...                                   # model(**batch) per micro-batch, then optimizer.step()
        token_input.take()                    # {"source": "labels", "tokens": [412, 388], ...}
    """

    def __init__(self) -> None:
        self.handle: Any = None
        self.compiling: Callable[[], bool] = _never
        self.grad_enabled: Callable[[], bool] = _always
        self.model: Optional[int] = None
        self.rows: List[Any] = []
        self.source: Optional[str] = None
        self.width = 0
        self.num_items = False
        self.looks = 0

    def install(self, torch: Any) -> None:
        """Put the hook on (once); nothing when this torch has no global module hooks."""
        _put_hook(self, torch)

    def off(self) -> None:
        """Take the hook off for good."""
        handle, self.handle = self.handle, None
        if handle is not None:
            try:
                handle.remove()
            except Exception:
                pass

    def _hook(self, module: Any, args: Tuple[Any, ...]) -> None:
        if self.model is not None and id(module) != self.model:
            return None
        if self.compiling() or not self.grad_enabled():
            return None
        try:
            self._look(module, args)
        except Exception:
            self.off()
        return None

    def _look(self, module: Any, args: Tuple[Any, ...]) -> None:
        self.looks += 1
        if self.model is None and self.looks > _MAX_LOOKS:
            self.off()  # no module call carried labels or a mask: nothing here to read
            return
        batch = _batch_of(args)
        if batch is None:
            batch = _call_kwargs()
        if not batch:
            return
        labels: Any = batch.get("labels")
        mask: Any = batch.get("attention_mask")
        rows = None
        if getattr(labels, "ndim", 0) >= 2:
            rows, source = (labels != IGNORE_INDEX).reshape(labels.shape[0], -1).sum(-1), "labels"
            width = int(labels[0].numel())
        elif getattr(mask, "ndim", 0) == 2:
            rows, source, width = mask.sum(-1), "attention_mask", int(mask.shape[-1])
        if rows is None:
            return
        self.model = id(module)
        if self.source is None:
            self.source = source
        self.width = max(self.width, width)
        self.rows.append(rows.detach())
        if batch.get("num_items_in_batch") is not None:
            self.num_items = True
        if len(self.rows) >= _MAX_READS:
            self.off()

    def take(self) -> Optional[Dict[str, Any]]:
        """At the first optimizer step: what the micro-batches so far were averaged over (None when
        no model call carried labels or an attention mask); the hook is taken off."""
        self.off()
        rows, self.rows = self.rows, []
        if not rows or self.source is None:
            return None
        per_batch = [[int(n) for n in r.tolist()] for r in rows]
        tokens = [sum(r) for r in per_batch]
        flat = [n for r in per_batch for n in r]
        low, high = min(flat), max(flat)
        return {
            "source": self.source,
            "micro_batches": len(per_batch),
            "tokens": tokens,
            "row_tokens": [low, high],
            "row_length": self.width,
            "varying": low != high or len(set(tokens)) > 1,
            "num_items_in_batch": self.num_items,
        }


token_input = TokenInput()
