"""Batch handling and out-of-memory detection shared by TrainStep and profile()."""

import collections.abc
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple, Type

import torch

# torch.cuda.OutOfMemoryError exists from 1.13 on (a RuntimeError subclass); torch.OutOfMemoryError
# from 2.5 (the same class, also raised by other backends). Older builds raise RuntimeError.
_OOM_TYPES: Tuple[Type[BaseException], ...] = ()
for _t in (getattr(torch.cuda, "OutOfMemoryError", None), getattr(torch, "OutOfMemoryError", None)):
    if _t is not None and _t not in _OOM_TYPES:
        _OOM_TYPES += (_t,)
del _t
_OOM_MESSAGES = (
    "out of memory",  # CUDA / MPS / XPU allocators, old and new
    "can't allocate memory",  # CPU DefaultCPUAllocator
    "cublas_status_alloc_failed",
    "cudnn_status_alloc_failed",
    "cuda error: out of memory",
)


def oom_error_type() -> Type[BaseException]:
    """The exception type this torch raises for device out-of-memory."""
    if _OOM_TYPES:
        return _OOM_TYPES[0]
    return RuntimeError


def is_oom_error(exc: BaseException) -> bool:
    """True for the framework's out-of-memory errors (CUDA, CPU allocator, cuBLAS/cuDNN allocs)."""
    if _OOM_TYPES and isinstance(exc, _OOM_TYPES):
        return True
    if isinstance(exc, (RuntimeError, MemoryError)):
        if isinstance(exc, MemoryError):
            return True
        msg = str(exc).lower()
        return any(m in msg for m in _OOM_MESSAGES)
    return False


def make_oom_error(detail: str) -> BaseException:
    """An instance of the real OOM type, as the allocator would raise it (for fault injection)."""
    return oom_error_type()("CUDA out of memory. Tried to allocate (injected by brim: %s)" % detail)


def _is_container_seq(x: Any) -> bool:
    return isinstance(x, (list, tuple)) and any(
        torch.is_tensor(v) or isinstance(v, (list, tuple, collections.abc.Mapping)) for v in x
    )


def batch_size(batch: Any) -> Optional[int]:
    """Size of dim 0 of the first tensor in the batch (tensors, sequences, mappings), or None."""
    if torch.is_tensor(batch):
        return int(batch.shape[0]) if batch.dim() > 0 else None
    if isinstance(batch, collections.abc.Mapping):
        for v in batch.values():
            n = batch_size(v)
            if n is not None:
                return n
        return None
    if isinstance(batch, (list, tuple)):
        if _is_container_seq(batch):
            for v in batch:
                n = batch_size(v)
                if n is not None:
                    return n
            return None
    return None


def _rebuild(template: Any, items: Iterable[Any]) -> Any:
    if isinstance(template, tuple) and hasattr(template, "_fields"):  # namedtuple
        return type(template)(*items)
    if isinstance(template, tuple):
        return tuple(items)
    return list(items)


def _rebuild_map(template: Any, pairs: List[Tuple[Any, Any]]) -> Any:
    try:
        return type(template)(pairs)
    except Exception:
        return dict(pairs)


def map_tensors(batch: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """Apply fn to every tensor of a nested batch, keeping the structure."""
    if torch.is_tensor(batch):
        return fn(batch)
    if isinstance(batch, collections.abc.Mapping):
        return _rebuild_map(batch, [(k, map_tensors(v, fn)) for k, v in batch.items()])
    if isinstance(batch, (list, tuple)):
        return _rebuild(batch, [map_tensors(v, fn) for v in batch])
    return batch


def iter_tensors(batch: Any) -> Iterator[Any]:
    if torch.is_tensor(batch):
        yield batch
    elif isinstance(batch, collections.abc.Mapping):
        for v in batch.values():
            for t in iter_tensors(v):
                yield t
    elif isinstance(batch, (list, tuple)):
        for v in batch:
            for t in iter_tensors(v):
                yield t


def slice_batch(batch: Any, start: int, stop: int, n: int) -> Any:
    """Samples [start, stop) of a batch of n samples: tensors with dim 0 == n and lists of n plain
    values are sliced; anything else (a shared tensor, a scalar, a config) is passed as is."""
    if torch.is_tensor(batch):
        if batch.dim() > 0 and batch.shape[0] == n:
            return batch[start:stop]
        return batch
    if isinstance(batch, collections.abc.Mapping):
        return _rebuild_map(batch, [(k, slice_batch(v, start, stop, n)) for k, v in batch.items()])
    if isinstance(batch, (list, tuple)):
        if _is_container_seq(batch):
            return _rebuild(batch, [slice_batch(v, start, stop, n) for v in batch])
        if len(batch) == n:
            return _rebuild(batch, batch[start:stop]) if not hasattr(batch, "_fields") else batch
        return batch
    return batch


def split_batch(batch: Any, n: int, chunks: int) -> List[Tuple[Any, int]]:
    """Split a batch of n samples into `chunks` parts as even as possible (sizes differ by at most
    one). Returns [(part, size)]."""
    chunks = max(1, min(chunks, n))
    base, extra = divmod(n, chunks)
    out: List[Tuple[Any, int]] = []
    start = 0
    for i in range(chunks):
        size = base + (1 if i < extra else 0)
        out.append((slice_batch(batch, start, start + size, n) if chunks > 1 else batch, size))
        start += size
    return out


def to_device(batch: Any, device: Any, non_blocking: bool = True) -> Any:
    """Move every tensor of a nested batch to `device` (non-blocking copies from pinned memory)."""
    if device is None:
        return batch
    device = torch.device(device)

    def move(t: Any) -> Any:
        if t.device == device:
            return t
        return t.to(device, non_blocking=non_blocking and device.type == "cuda")

    return map_tensors(batch, move)


def storage_of(t: Any) -> Tuple[int, int]:
    """(data_ptr, nbytes) of the storage behind a tensor, on torch 1.13 and 2.x."""
    st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    nbytes = st.nbytes() if callable(getattr(st, "nbytes", None)) else st.size() * t.element_size()
    return st.data_ptr(), int(nbytes)
