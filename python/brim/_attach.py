"""Attach: measure an unmodified PyTorch job from the inside, with no change to its code.

brim's job runner puts a `sitecustomize` first on PYTHONPATH (python/_brim_boot/); under brim
(BRIM_CHANNEL set, BRIM_ATTACH not 0) it calls install(), which adds an import hook and nothing
else: torch is never imported by brim. When the job imports torch, brim wraps:

- `Optimizer.step` of every optimizer class (the outermost call only: a subclass calling
  super().step(), an LR scheduler's or accelerate's wrapper count once): one step each;
- `Tensor.backward`, only while the job has created no optimizer (hand-written SGD): one step each;
- the DataLoader iterator's `__next__`: the data wait (see _timing) and samples per batch; a batch
  fetched with gradients off (a validation or test loop: Lightning's sanity check, `torch.no_grad()`)
  is held apart and never counts as training samples, unless an optimizer step follows it with no
  other batch in between; a step that ran more such batches than its own (a validation pass) is not
  a steady step (flagged warm-up);
- `DataLoader.__init__`: one "loader" event per loader told apart by its object (the place in the
  job's code that builds it and the data set it reads: Lightning builds its training and validation
  loaders at one line), with its real batch size, workers, pinning, and the samples the data set and
  this rank's sampler hold; then one "loader_use" event per loader once its use is seen: "train"
  (its batches end in an optimizer step) or "eval" (fetched with gradients off, not followed by one);
- a loader `accelerator.prepare` or Lightning builds again from the job's is the job's (its "loader"
  event sent again with the copy's details, the same number and the job's line), and
  the batch accelerate's `DataLoaderShard.__iter__` fetches ahead counts when it is handed over
  (_accelerate);
- `torch.autocast.__enter__`: the precision in force;
- `torch.cuda._lazy_init` when a GPU cap is set: the allocator limit before the first allocation.

When torch is imported, the knobs every torch job has without a key (`cpu_threads`,
`matmul_precision`: `_job_wide.py`) are set to a trial's values; the values in force are reported as
those knobs' reads once the process builds an optimizer.

A step is counted at the next of these points (or at exit), so that a job that also reports
through the SDK (brim.track, report_step, the Lightning/HF callbacks) counts each step once: the
attach stands back for good as soon as the SDK reports a step. At the step budget, or when brim
asks the job to stop, the job ends with exit status 0 at the next of these points (SystemExit).
DataLoader workers never step an optimizer, so they stay silent.
"""

import os
import sys
import time
from types import FrameType
from typing import Any, Dict, Optional

from . import _env, _job_wide, _loader_args, _loss, _model_facts, _state
from ._import_hook import OnImport
from ._model_input import model_input
from ._step_state import _grad_enabled, _uses, attach, watch_models
from ._wrap import wrap_once

_PRECISIONS = {"torch.bfloat16": "bf16-mixed", "torch.float16": "fp16-mixed"}


def enabled() -> bool:
    """True when this process is under brim and the attach is not switched off (BRIM_ATTACH=0)."""
    return _env.attach_on()


# -- the wrappers ---------------------------------------------------------------------------------

def _wrap_step(step: Any) -> Any:
    def step_with_brim(self: Any, *args: Any, **kwargs: Any) -> Any:
        if attach.depth:
            return step(self, *args, **kwargs)
        _model_facts.first_step(self)
        attach.step_begin()
        attach.depth += 1
        try:
            out = step(self, *args, **kwargs)
        finally:
            attach.depth -= 1
        attach.step_end("optimizer", self)
        return out

    return step_with_brim


def _patch_optimizer(torch: Any) -> None:
    def wrap_init(original: Any) -> Any:
        def init_with_brim(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            attach.optimizer_built(self)
            _job_wide.report(self)
            # torch's own profiling wrapper (1.13 and 2.x) is put on the class by __init__ once and
            # marked `hooked`; functools.wraps carries that mark, so it is not put on twice
            wrap_once(type(self), "step", _wrap_step)

        return init_with_brim

    wrap_once(torch.optim.Optimizer, "__init__", wrap_init)


def _wrap_backward(original: Any) -> Any:
    def backward_with_brim(self: Any, *args: Any, **kwargs: Any) -> Any:
        _loss.seen(self, args, kwargs)
        if attach.optimizer_created:  # also inside optimizer.step(closure) (Lightning)
            t0 = time.perf_counter()
            try:
                out = original(self, *args, **kwargs)
            finally:
                attach.backward_s += time.perf_counter() - t0
            attach.backward_seen()
            return out
        if attach.depth:
            return original(self, *args, **kwargs)
        attach.step_begin()
        attach.depth += 1
        try:
            out = original(self, *args, **kwargs)
        finally:
            attach.depth -= 1
        attach.backward_seen()
        if not attach.optimizer_created:
            attach.step_end("backward")
        return out

    return backward_with_brim


def _patch_backward(torch: Any) -> None:
    wrap_once(torch.Tensor, "backward", _wrap_backward)


def _patch_loader(torch: Any) -> None:
    def wrap_next(original: Any) -> Any:
        def next_with_brim(self: Any) -> Any:
            token = attach.fetch_begin()
            batch = original(self)
            attach.fetch_end(self, token, batch)
            return batch

        return next_with_brim

    wrap_once(torch.utils.data.dataloader._BaseDataLoaderIter, "__next__", wrap_next)
    _grad_enabled[0] = torch.is_grad_enabled

    def wrap_iterator(original: Any) -> Any:
        def iterator_with_brim(self: Any) -> Any:
            it = original(self)
            try:
                it._brim_loader = getattr(self, "_brim_loader", None)
            except Exception:
                pass
            return it

        return iterator_with_brim

    wrap_once(torch.utils.data.DataLoader, "_get_iterator", wrap_iterator)


_SKIP_DIRS = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))),)


def _passes_through(frame: FrameType, name: str) -> bool:
    """A library frame that only passes a DataLoader's construction on: Lightning's `__init__`
    wrapper (every loader a LightningModule or DataModule builds goes through it)."""
    return frame.f_code.co_name == "wrapper" and name.replace(os.sep, "/").endswith(_PASS_THROUGH)


_PASS_THROUGH = ("lightning/fabric/utilities/data.py", "lightning_fabric/utilities/data.py")


def _caller_site(torch: Any) -> Optional[str]:
    """file:line of the job's code that built the object: the first frame outside torch and brim."""
    skip = _SKIP_DIRS + (os.path.dirname(os.path.abspath(torch.__file__)),)
    frame: Optional[FrameType] = sys._getframe(2)
    while frame is not None:
        name = os.path.abspath(frame.f_code.co_filename)
        if not name.startswith(skip) and not name.startswith("<") and not _passes_through(frame, name):
            return "%s:%d" % (name, frame.f_lineno)
        frame = frame.f_back
    return None


# (function, file): where a library builds a loader again from the job's, held in its `dataloader`
_COPIERS = (
    ("prepare_data_loader", "accelerate/data_loader.py"),
    ("skip_first_batches", "accelerate/data_loader.py"),
    ("_update_dataloader", "lightning/fabric/utilities/data.py"),
    ("_update_dataloader", "lightning_fabric/utilities/data.py"),
)


def _copied_from(frame: Optional[FrameType]) -> Any:
    """The job's loader that a library is building this one again from, if any: accelerate's
    `prepare_data_loader` (`accelerator.prepare`: the HF Trainer, sentence-transformers, TRL, a
    plain accelerate loop) and Lightning's `_update_dataloader` (a distributed sampler put in) build
    a loader of their own from the job's, which they then iterate instead."""
    depth = 0
    while frame is not None and depth < 8:
        name = frame.f_code.co_filename.replace(os.sep, "/")
        if any(frame.f_code.co_name == function and name.endswith(where) for function, where in _COPIERS):
            original = frame.f_locals.get("dataloader")
            return original if getattr(original, "_brim_loader", None) is not None else None
        frame = frame.f_back
        depth += 1
    return None


def _loader_details(loader: Any) -> Dict[str, Any]:
    """What a DataLoader really got: its batch size, workers, pinning, and the data it sees (the whole
    data set, and the samples of this rank when a sampler shards it, e.g. DistributedSampler)."""
    details = {
        "batch_size": getattr(loader, "batch_size", None),
        "num_workers": getattr(loader, "num_workers", None),
        "pin_memory": getattr(loader, "pin_memory", None),
        "persistent_workers": getattr(loader, "persistent_workers", None),
        "prefetch_factor": getattr(loader, "prefetch_factor", None),
        "drop_last": getattr(loader, "drop_last", None),
    }  # type: Dict[str, Any]
    try:
        details["dataset_len"] = len(loader.dataset)
    except Exception:
        details["dataset_len"] = None
    sampler: Any = getattr(loader, "sampler", None)
    try:
        details["samples_per_rank"] = int(sampler.num_samples) if hasattr(sampler, "num_replicas") else len(sampler)
    except Exception:
        details["samples_per_rank"] = details["dataset_len"]
    return details


def _patch_loader_init(torch: Any) -> None:
    def wrap_init(original: Any) -> Any:
        def init_with_brim(self: Any, *args: Any, **kwargs: Any) -> None:
            where = None  # type: Optional[str]
            given = None  # type: Optional[Dict[str, Any]]
            try:
                original_loader = _copied_from(sys._getframe(1))
            except Exception:
                original_loader = None
            if original_loader is not None:
                # the library's copy is the job's loader (its settings copied from it, a sampler put
                # in): the same loader, known by the job's line, its details now the copy's
                original(self, *args, **kwargs)
                try:
                    loader, where = original_loader._brim_loader, getattr(original_loader, "_brim_where", None)
                    object.__setattr__(self, "_brim_loader", loader)
                    object.__setattr__(self, "_brim_where", where)
                    details = _loader_details(self)
                    source = _loader_args.workers_source(where)
                    if source is not None:
                        details["num_workers_from"] = source
                    _state.event("loader", message="a library built the DataLoader again from the job's", where=where, loader=loader, **details)
                except Exception:
                    pass
                return
            try:
                where = _caller_site(torch)
                given = _loader_args.wanted(where)
                if given:
                    args, kwargs = _loader_args.with_arguments(original, self, args, kwargs, given)
            except Exception:
                given = None
            original(self, *args, **kwargs)
            try:
                loader, new = _uses.ordinal(where, getattr(self, "dataset", None))
                # past Lightning's and DataLoader's own __setattr__ (Lightning would copy it onto a
                # loader it builds again from this one)
                object.__setattr__(self, "_brim_loader", loader)
                object.__setattr__(self, "_brim_where", where)
                if not new:
                    return
                details = _loader_details(self)
                if given:
                    details["brim_args"] = given
                source = _loader_args.workers_source(where)
                if source is not None:
                    details["num_workers_from"] = source
                _state.event("loader", message="a DataLoader was built", where=where, loader=loader, **details)
            except Exception:
                pass

        return init_with_brim

    wrap_once(torch.utils.data.DataLoader, "__init__", wrap_init)


def _patch_model_input(torch: Any) -> None:
    model_input.install(torch)


def _patch_autocast(torch: Any) -> None:
    def wrap_enter(original: Any) -> Any:
        def enter_with_brim(self: Any) -> Any:
            out = original(self)
            try:
                if getattr(self, "_enabled", True):
                    attach.precision = _PRECISIONS.get(str(getattr(self, "fast_dtype", None)), attach.precision)
            except Exception:
                pass
            return out

        return enter_with_brim

    autocast = getattr(torch, "autocast", None)
    if autocast is not None:
        wrap_once(autocast, "__enter__", wrap_enter)


def _cap_device(cuda: Any) -> int:
    local = _env.local_rank()
    if local is not None and 0 <= local < cuda.device_count():
        return local
    return int(cuda.current_device())


def _patch_cap(torch: Any) -> None:
    """With a GPU cap, set the allocator limit right after CUDA initialises, before the job's
    first allocation. The overhead outside the allocator is BRIM_MEMORY_CAP_OVERHEAD_BYTES or
    512 MiB: measuring it would create a CUDA context, maybe on a device the job does not use."""
    if _env.memory_cap_bytes() is None and _env.memory_cap_fraction() is None:
        return
    cuda = torch.cuda

    def wrap_lazy_init(original: Any) -> Any:
        done = [False]

        def lazy_init_with_brim() -> None:
            original()
            if done[0]:
                return
            done[0] = True  # set first: apply_cap calls _lazy_init again
            try:
                from .torch._setup import apply_cap

                index = _cap_device(cuda)
                with cuda.device(index):
                    apply_cap(device=index, measure_overhead=False)
            except Exception as e:
                _env.warn_once("attach-cap", "could not apply the GPU memory cap: %s: %s" % (type(e).__name__, e))

        return lazy_init_with_brim

    wrap_once(cuda, "_lazy_init", wrap_lazy_init)


def _patch_seed(torch: Any) -> None:
    """A trial's runs start from one seed of torch's generator (BRIM_SEED), set at torch's import, before
    the job builds a model or a loader: the same weights and data order in every run of a tune, so that
    their losses compare step by step. A job that seeds torch itself does so later, and its seed wins.
    Each rank of a launcher gets its own (seed + rank), as each had its own before: dropout stays per rank."""
    value = _env.seed()
    if value is not None:
        from ._ranks import rank

        torch.manual_seed(value + rank())


def patch_torch(torch: Any) -> None:
    """Put brim's wrappers on an imported torch (1.13 or 2.x). Each part fails alone."""
    from ._ranks import _patch_init_process_group

    for patch in (_patch_seed, _patch_cap, _patch_optimizer, _patch_backward, _patch_loader, _patch_loader_init, _patch_autocast, _loss._patch_scaler,
                  _patch_init_process_group, _patch_model_input, _model_facts.patch_clip, _job_wide.set_at_import):
        try:
            patch(torch)
        except Exception as e:
            _env.warn_once("attach-" + patch.__name__, "attach could not wrap %s (%s: %s); brim sees less of this job"
                           % (patch.__name__.replace("_patch_", ""), type(e).__name__, e))
    try:
        watch_models(torch)
    except Exception:
        pass
    if _env.footprint_on():  # brim plan's measuring runs only
        try:
            from . import _footprint

            _footprint.install(torch)
        except Exception as e:
            _env.warn_once("attach-footprint", "brim plan could not count the step's memory (%s: %s)" % (type(e).__name__, e))


_installed = [False]


def install() -> bool:
    """Attach to this process (idempotent). Returns False when not under brim or switched off."""
    if _installed[0] or not enabled():
        return _installed[0]
    _installed[0] = True
    from . import _ranks

    _ranks.install()
    torch = sys.modules.get("torch")
    if torch is not None:
        patch_torch(torch)
    else:
        sys.meta_path.insert(0, OnImport("torch", patch_torch))
    from . import _accelerate, _jax_attach, _vec_env

    _accelerate.install()
    _jax_attach.install()
    _vec_env.install()
    from . import _metrics

    _metrics.install()
    return True


def installed() -> bool:
    return _installed[0]


def at_exit() -> None:
    try:
        if _installed[0]:
            attach.finish()
    except Exception:
        pass
