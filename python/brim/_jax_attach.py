"""Attach for JAX loops: count the training steps of an unmodified JAX job.

A JAX training loop has no optimizer object and no DataLoader for brim to wrap: its step is a jitted
function that takes a gradient (`jax.grad`, `jax.value_and_grad`, `jax.vjp`) and is called once per
batch, as in jax's own `examples/mnist_classifier.py` (`update(i, opt_state, next(batches))`), an
optax or flax `train_step(state, batch)`. When the job imports jax, brim wraps `jax.jit` and the
gradient transforms (never importing jax itself): a jitted function whose first trace called a
gradient is a training step, and each later call of it counts one step through the attach (the step
budget, the stop, the interval between steps). Its samples are the batch dimension of its last
positional argument (the batch, by the convention of these loops), found as for a DataLoader's batch.

JAX dispatches asynchronously: on the CPU a loop runs a whole epoch of `update` calls ahead of the
computation (brim saw 30 steps "done" at 19 times their real speed), so the time between two calls is
not a step's time. The wrapper therefore keeps one output array of each of the last steps and, at
step k, waits for the output of step k - 4: the device still holds steps k - 3 to k queued, so it
never idles for brim, the loop runs at most four steps ahead, and the time between two calls is the
device's step time. Nothing else is read or copied.

A call that traces the function again (a new input shape, such as the short last batch of an epoch)
compiles inside that step, which then takes many times a step's time: it is sent as a warm-up step
(with `compiled: true`), so it stays out of the steady figures as the first call's compile does.
"""

import collections
import functools
import sys
from typing import Any, Deque, List, Optional

from ._import_hook import OnImport
from ._samples import BatchDim
from ._wrap import wrap_once

_GRAD_TRANSFORMS = ("grad", "value_and_grad", "vjp")
AHEAD = 4  # steps the loop may run ahead of the device


class _Trace:
    """The jitted functions being traced right now (innermost last), and whether each took a gradient."""

    def __init__(self) -> None:
        self.stack: List[List[bool]] = []

    def gradient_seen(self) -> None:
        for frame in self.stack:
            frame[0] = True


_trace = _Trace()


class _Jitted:
    """A jitted function that counts its calls as training steps once its trace took a gradient."""

    def __init__(self, jitted: Any) -> None:
        self._brim_jitted = jitted
        self._brim_train: Optional[bool] = None
        self._brim_dim = BatchDim(None)
        self._brim_pending: Deque[Any] = collections.deque()
        functools.update_wrapper(self, jitted, updated=())

    def __getattr__(self, name: str) -> Any:
        # lower, trace, eval_shape, clear_cache...: the jitted function's own
        return getattr(self.__dict__["_brim_jitted"], name)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        jitted = self._brim_jitted
        if self._brim_train is False or _trace.stack:
            return jitted(*args, **kwargs)
        from ._step_state import attach

        attach.step_begin()
        # every call that traces (the first, and a new shape such as an epoch's short last batch)
        # compiles inside the step; a training step's trace calls a gradient transform, which marks the frame
        frame = [False]
        _trace.stack.append(frame)
        try:
            out = jitted(*args, **kwargs)
        finally:
            _trace.stack.pop()
        if self._brim_train is None:
            self._brim_train = frame[0]
        if self._brim_train:
            self._count(attach, args, out, compiled=frame[0])
        return out

    def _count(self, attach: Any, args: Any, out: Any, compiled: bool = False) -> None:
        if attach.yielded:
            return
        pending = self._brim_pending
        leaf = _first_array(out)
        if leaf is not None:
            pending.append(leaf)
        if len(pending) > AHEAD:
            try:
                pending.popleft().block_until_ready()
            except Exception:
                pass
        n = None
        if args:
            try:
                n = self._brim_dim(args[-1])
            except Exception:
                n = None
        attach.batches = 1
        attach.micro_batch = n
        attach.samples = n
        attach.step_end("jax", compiled=compiled)


def _first_array(tree: Any) -> Any:
    """One output array of a step (all of a step's outputs come from one computation), or None."""
    for _ in range(8):
        if hasattr(tree, "block_until_ready"):
            return tree
        if isinstance(tree, dict):
            tree = next(iter(tree.values()), None)
        elif isinstance(tree, (list, tuple)):
            tree = tree[0] if tree else None
        else:
            return None
    return None


def _wrap_jit(jit: Any) -> Any:
    def jit_with_brim(*args: Any, **kwargs: Any) -> Any:
        out = jit(*args, **kwargs)
        if args and callable(args[0]) and callable(out):
            return _Jitted(out)
        if not args and callable(out):  # jax.jit(static_argnums=...) used as a decorator factory
            return lambda fun: _Jitted(out(fun))
        return out

    return jit_with_brim


def _wrap_transform(transform: Any) -> Any:
    def transform_with_brim(*args: Any, **kwargs: Any) -> Any:
        if _trace.stack:
            _trace.gradient_seen()
        out = transform(*args, **kwargs)
        if not callable(out):  # vjp returns (value, vjp_fn): the call itself took the gradient
            return out

        @functools.wraps(out)
        def transformed(*a: Any, **k: Any) -> Any:
            if _trace.stack:
                _trace.gradient_seen()
            return out(*a, **k)

        return transformed

    return transform_with_brim


def patch_jax(jax: Any) -> None:
    """Put brim's wrappers on an imported jax: `jax.jit` and the gradient transforms."""
    wrap_once(jax, "jit", _wrap_jit)
    for name in _GRAD_TRANSFORMS:
        wrap_once(jax, name, _wrap_transform)


def _patch_or_warn(jax: Any) -> None:
    try:
        patch_jax(jax)
    except Exception as e:
        from . import _env

        _env.warn_once("attach-jax", "attach could not wrap jax (%s: %s); brim sees no JAX step" % (type(e).__name__, e))


def install() -> None:
    """Wrap jax now if it is imported, else when it is."""
    jax = sys.modules.get("jax")
    if jax is not None:
        patch_jax(jax)
    else:
        sys.meta_path.insert(0, OnImport("jax", _patch_or_warn))
