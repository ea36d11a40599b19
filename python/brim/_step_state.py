"""The framework-neutral step state of the attach: what the hooks have seen since the last counted
step (batches, their samples and waits, the loaders told apart and their use, the precision), and
the one `attach` object that counts a step at the next hook point. The torch hooks (_attach.py) and
the JAX hooks (_jax_attach.py) both drive it; neither imports the other.
"""

import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from . import _loss, _state, _tracking
from ._model_input import StepSamples, model_input, told
from ._samples import BatchDim
from ._vec_env import env_steps
from ._timing import Wait, WaitSum

# a step that entered no autocast trains in its parameters' dtype (Lightning's "32-true", "bf16-true")
_TRUE_PRECISIONS = {"torch.float32": "fp32", "torch.bfloat16": "bf16-true", "torch.float16": "fp16-true", "torch.float64": "fp64"}
_param_precisions: Dict[int, Optional[str]] = {}


def _param_precision(optimizer: Any) -> Optional[str]:
    """The dtype of the optimizer's first parameter as a precision, read once per optimizer."""
    key = id(optimizer)
    if key not in _param_precisions:
        try:
            dtype = str(optimizer.param_groups[0]["params"][0].dtype)
        except Exception:
            dtype = ""
        _param_precisions[key] = _TRUE_PRECISIONS.get(dtype)
    return _param_precisions[key]


_MAX_LOADERS = 64
# the loader-fed steps whose model input is read beside the loader's count: after the first (set-up)
# one, this many; then the model-input hook goes off
_MODEL_SKIP, _MODEL_READS = 1, 3
# torch.is_grad_enabled once torch is imported (a fetch with gradients off is validation or test)
_grad_enabled: List[Callable[[], bool]] = [lambda: True]


class _LoaderUses:
    """The loaders told apart (by object: where the job built it and the data set it reads) and what
    each was seen to feed: "train" (its batches ended in an optimizer step) or "eval" (fetched with
    gradients off and not trained on). One event per loader and use."""

    def __init__(self) -> None:
        self.keys: Dict[Tuple[Optional[str], int], int] = {}
        self.train: Set[int] = set()
        self.eval: Set[int] = set()

    def ordinal(self, where: Optional[str], dataset: Any) -> Tuple[Optional[int], bool]:
        """The loader's number, and whether it is new (a loader built again over the same data at the
        same place, each epoch say, keeps its number). None past _MAX_LOADERS loaders."""
        key = (where, id(dataset))
        known = self.keys.get(key)
        if known is not None:
            return known, False
        if len(self.keys) >= _MAX_LOADERS:
            return None, False
        self.keys[key] = len(self.keys)
        return self.keys[key], True

    def seen(self, loader: Optional[int], use: str) -> None:
        if loader is None:
            return
        uses = self.train if use == "train" else self.eval
        if loader in uses:
            return
        uses.add(loader)
        message = ("its batches feed the training steps" if use == "train"
                   else "its batches were fetched with gradients off (validation or test): not training samples")
        try:
            _state.event("loader_use", message="DataLoader %d: %s" % (loader, message), loader=loader, use=use)
        except Exception:
            pass


_uses = _LoaderUses()


def _loader_of(it: Any) -> Optional[int]:
    """The number of the loader an iterator reads (set when the loader made it), else None."""
    n = getattr(it, "_brim_loader", None)
    return n if isinstance(n, int) else None


class _Attach:
    """What the hooks have seen since the last counted step."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.optimizer_created = False
        self.depth = 0  # nesting of optimizer.step / backward calls
        self.yielded = False  # the SDK reports this process's steps
        self.sdk_mark = 0
        self.deferred: Optional[Dict[str, Any]] = None
        self.t_last: Optional[float] = None
        self.waits: List[Wait] = []
        self.batches = 0
        self.samples: Optional[int] = 0
        self.micro_batch: Optional[int] = None
        self.window_opt: Optional[int] = None  # the optimizer that stepped since the last fetch
        self.loader_seen = False
        self.precision: Optional[str] = None
        self.backward_s = 0.0  # host time inside backward() since the last step (DDP's all-reduce waits there)
        self.exiting = False
        self.fed: Set[int] = set()  # the loaders whose batches count in this step
        # batches fetched with gradients off since the last step: (loader, samples, wait)
        self.held: List[Tuple[Optional[int], Optional[int], Wait]] = []
        self.model = StepSamples()  # with no DataLoader batch: what the model's input says
        self.loader_steps = 0  # steps a DataLoader batch fed, while the model's input is read beside it
        self.loader_fed = False  # a DataLoader batch fed a step: the model's input never counts its samples
        # a loader that fetches one batch ahead of the one it hands over (accelerate's): its fetches
        # wait here, (loader, samples, wait), and count when their batch is handed to the job
        self.ahead: Optional[List[Tuple[Optional[int], Optional[int], Wait]]] = None

    # -- points where the job's own code runs through brim ------------------------------------
    def hook_point(self) -> None:
        st = _state.state
        if self.deferred is not None:
            step, self.deferred = self.deferred, None
            if st.sdk_steps != self.sdk_mark:
                self.yielded = True
            else:
                _tracking.count_step(**step)
        if st.sdk_steps != self.sdk_mark:
            self.sdk_mark = st.sdk_steps
            self.yielded = True
        if self.yielded:
            return
        _tracking.flush()
        if st.stop_reason is None and _state.connected():
            _state.poll()
        if st.stop_reason is not None and not self.exiting:
            self.exit(st.stop_reason)

    def exit(self, reason: str) -> None:
        self.exiting = True
        _tracking.flush(block=True)
        if reason != "budget":
            _state.event("attach_stop", message="brim asked the job to stop; it ends here with exit status 0",
                         step=_state.state.steps, reason=reason)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        raise SystemExit(0)

    def fetch_begin(self) -> Any:
        self.hook_point()
        if self.yielded:
            return None
        token = _tracking.clock.fetch_begin()
        if self.t_last is None:
            self.t_last = token[0]
        return token

    def fetch_end(self, it: Any, token: Any, batch: Any) -> None:
        if token is None or self.yielded:
            return
        wait = _tracking.clock.fetch_end(token)
        dim = getattr(it, "_brim_dim", None)
        if dim is None:
            sampler = getattr(it, "_index_sampler", None)
            dim = BatchDim(getattr(sampler, "batch_size", None))
            try:
                it._brim_dim = dim
            except Exception:
                pass
        n = dim(batch)
        loader = _loader_of(it)
        if self.ahead is not None:
            self.ahead.append((loader, n, wait))
            return
        self.take_batch(loader, n, wait)

    def handed(self, fetched: List[Tuple[Optional[int], Optional[int], Wait]]) -> None:
        """A loader that fetches ahead handed the oldest batch it fetched to the job: it counts now."""
        if fetched and not self.yielded:
            self.take_batch(*fetched.pop(0))

    def take_batch(self, loader: Optional[int], n: Optional[int], wait: Wait) -> None:
        self.loader_seen = True
        self.window_opt = None
        if not _grad_enabled[0]() and loader not in _uses.train:
            # validation or test (gradients off): held apart until a step says whether it trained
            self.held.append((loader, n, wait))
            return
        self.count_batch(loader, n, wait)

    def count_batch(self, loader: Optional[int], n: Optional[int], wait: Wait) -> None:
        self.waits.append(wait)
        self.batches += 1
        self.micro_batch = n
        self.samples = None if n is None or self.samples is None else self.samples + n
        self.loader_fed = True
        if loader is not None:
            self.fed.add(loader)

    def optimizer_built(self, optimizer: Any) -> None:
        """The job built an optimizer: said once per process, so that brim stops counting the job's
        printed progress lines (the attach counts this optimizer's steps)."""
        if not _said["optimizer"]:
            _said["optimizer"] = True
            _state.event("optimizer_built", message="the job built an optimizer (%s): the attach counts its steps"
                         % type(optimizer).__name__, name=type(optimizer).__name__)
        self.optimizer_created = True

    def backward_seen(self) -> None:
        """A backward returned: the batch of the forward before it counts in this step."""
        if model_input.live and not self.yielded:
            self.model.backward(self.depth > 0)

    def step_begin(self) -> None:
        self.hook_point()
        if self.t_last is None:
            self.t_last = time.perf_counter()

    def step_end(self, trigger: str, optimizer: Any = None, compiled: bool = False) -> None:
        if self.yielded:
            return
        if optimizer is not None and self.loader_seen:
            # several optimizers stepping on one batch (a GAN): the first one counts the step
            if self.window_opt is not None and self.window_opt != id(optimizer):
                return
            self.window_opt = id(optimizer)
        # a validation pass inside this step (more of its batches than the step's own) makes its time no
        # training step's: not a steady step (as the tune once judged it by its batch count)
        evaluated = self.batches > 0 and len(self.held) > self.batches
        if self.batches == 0 and self.held:
            # batches fetched with gradients off and then trained on (no other batch between): training
            for loader, n, held_wait in self.held:
                self.count_batch(loader, n, held_wait)
        else:
            for loader, _, _ in self.held:
                _uses.seen(loader, "eval")
        self.held = []
        for loader in self.fed:
            _uses.seen(loader, "train")
        self.fed = set()
        now = time.perf_counter()
        interval = now - self.t_last if self.t_last is not None else None
        self.t_last = now
        wait = WaitSum(self.waits) if self.waits else None
        precision = self.precision if self.precision is not None or optimizer is None else _param_precision(optimizer)
        fields: Dict[str, Any] = {"trigger": trigger, "precision": precision}
        if trigger == "optimizer" and self.backward_s > 0:
            fields["backward_s"] = self.backward_s
        if compiled:
            fields["compiled"] = True
        self.backward_s = 0.0
        samples, micro, batches = self._samples()
        self.deferred = {
            "samples": samples,
            "micro_batch": micro,
            "accumulation": batches or None,
            "source": "attach",
            "wait": wait,
            "interval_s": interval,
            "compute_s": interval if wait is None else None,
            "wait_s": None,
            "at": time.time(),
            "loss": _loss.take(),
            "fields": fields,
        }
        extra: Dict[str, Any] = {}
        envs = env_steps.total
        if envs:
            extra["env_steps"] = envs
        model_samples = self._model_beside_loader()
        if model_samples is not None:
            extra["model_samples"] = model_samples
        if extra:
            self.deferred["extra"] = extra
        if compiled or evaluated:
            # a step that compiled, or ran a validation pass, is not a steady step, wherever it falls
            self.deferred["warmup"] = True
        self.waits = []
        self.batches = 0
        self.samples = 0
        self.micro_batch = None
        self.precision = None
        self.model = StepSamples()

    def _model_beside_loader(self) -> Optional[int]:
        """In one of the first few steps DataLoader batches fed: the samples the model's input said
        (the loader's count stays the step's samples: a sequence-first or two-view model input can
        say another number), else None. The hook goes off after those steps."""
        if not self.batches or not model_input.live:
            return None
        self.loader_steps += 1
        if self.loader_steps >= _MODEL_SKIP + _MODEL_READS:
            model_input.off()
        if self.loader_steps <= _MODEL_SKIP or not self.model.batches:
            return None
        return self.model.samples

    def _samples(self) -> Tuple[Optional[int], Optional[int], int]:
        """The step's samples, micro-batch and batches: from its DataLoader batches, else from the
        model's input (said once in an event)."""
        if self.batches or not self.model.batches or self.loader_fed:
            return (self.samples if self.batches else None), (self.micro_batch if self.batches else None), self.batches
        if self.model.samples is not None and not told[0]:
            told[0] = True
            _state.event("samples_source", source="model_input", samples=self.model.samples,
                         message="no DataLoader batch feeds the steps: samples counted from the batch dimension of the "
                                 "model's input (%d in the first step)" % self.model.samples)
        return self.model.samples, self.model.micro_batch, self.model.batches

    def finish(self) -> None:
        """At exit: count the last step and send what is left."""
        if self.deferred is not None and not self.yielded:
            step, self.deferred = self.deferred, None
            if _state.state.sdk_steps == self.sdk_mark:
                _tracking.count_step(**step)


def watch_models(torch: Any) -> None:
    """Say `attach_on` when this process first builds a module with parameters (a model): a launcher
    that only imports torch (torchrun, DeepSpeed's) builds none and stays off the channel."""
    register = getattr(torch.nn.modules.module, "register_module_parameter_registration_hook", None)
    if register is None:
        return

    def built(module: Any, name: str, param: Any) -> None:
        if not _said["watching"]:
            watching("torch")

    register(built)


def watching(framework: str) -> None:
    """The job's main process built a model of a framework the attach counts steps of: said once, so
    that brim stops counting the job's printed progress lines (a data-preparation bar is no training
    step): the attach counts."""
    if _said["watching"]:
        return
    _said["watching"] = True
    try:
        import multiprocessing

        if multiprocessing.parent_process() is not None or multiprocessing.current_process().name != "MainProcess":
            return  # a worker (loader, environment) steps no optimizer
    except Exception:
        pass
    # acknowledged: a bar the job draws next (data preparation) must reach brim after this, not before
    _state.event_acknowledged("attach_on", message="the attach watches this process's %s steps" % framework, framework=framework)


_said = {"optimizer": False, "watching": False}
attach = _Attach()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=attach.reset)
