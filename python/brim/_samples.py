"""How many samples a batch holds: its batch dimension, found robustly.

A batch is a tensor, or tuples, lists, dicts (and namedtuples, dataclass-like mappings) of them,
nested. The batch dimension is, in order:
1. where it was found in the earlier batches of the same loader (a short last batch keeps it);
2. the dimension equal to the known batch size (the DataLoader's batch_size, or the trial's
   batch-size knob), so a sequence-first batch (seq, batch) counts `batch`, not `seq`;
3. dimension 0 when every tensor agrees on it; dimension 1 when the tensors disagree on dimension
   0 but all 2-d-or-more tensors agree on dimension 1 (sequence-first data with a batch-first or
   per-sample target);
4. otherwise unknown (None): a wrong count is worse than none.
A list of plain values (strings, numbers) counts its length.
"""

from typing import Any, List, Optional, Tuple

from . import _env

Path = Tuple[Any, ...]
_MAX_DEPTH = 6
_MAX_TENSORS = 64
BATCH_SIZE_KNOBS = ("batch_size", "micro_batch", "micro_batch_size", "per_device_train_batch_size", "bs")


def _shape(x: Any) -> Optional[Tuple[int, ...]]:
    shape = getattr(x, "shape", None)
    if shape is None or isinstance(x, type):
        return None
    try:
        return tuple(int(d) for d in shape)
    except Exception:
        return None


def _is_mapping(x: Any) -> bool:
    return isinstance(x, dict) or (hasattr(x, "keys") and hasattr(x, "__getitem__") and not isinstance(x, type))


def _collect(batch: Any, path: Path, out: List[Tuple[Path, Tuple[int, ...]]], depth: int) -> None:
    if depth > _MAX_DEPTH or len(out) >= _MAX_TENSORS:
        return
    shape = _shape(batch)
    if shape is not None:
        if len(shape) >= 1:
            out.append((path, shape))
        return
    if _is_mapping(batch):
        try:
            keys = list(batch.keys())
        except Exception:
            return
        for k in keys:
            try:
                v = batch[k]
            except Exception:
                continue
            _collect(v, path + (k,), out, depth + 1)
        return
    if isinstance(batch, (list, tuple)):
        for i, v in enumerate(batch):
            _collect(v, path + (i,), out, depth + 1)


def _at(batch: Any, path: Path) -> Any:
    for key in path:
        batch = batch[key]
    return batch


def has_tensor(batch: Any) -> bool:
    """Whether the batch holds a tensor of one dimension or more (nested as _collect looks)."""
    shapes: List[Tuple[Path, Tuple[int, ...]]] = []
    _collect(batch, (), shapes, 0)
    return bool(shapes)


def knob_batch_size() -> Optional[int]:
    """The trial's batch-size knob when it sets one (BRIM_KNOBS), else None."""
    try:
        values = _env.knobs()
    except Exception:
        return None
    for name in BATCH_SIZE_KNOBS:
        v = values.get(name)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


class BatchDim:
    """The batch dimension of one stream of batches; remembers where it found it.

        dim = BatchDim(hint=loader.batch_size)
        dim(batch)    # 32
    """

    def __init__(self, hint: Optional[int] = None):
        self.hint = hint if isinstance(hint, int) and hint > 0 else None
        self._where: Optional[Tuple[Path, int]] = None
        self.how: Optional[str] = None  # "hint" | "dim0" | "dim1" | "len" | None

    def __call__(self, batch: Any) -> Optional[int]:
        if self._where is not None:
            path, d = self._where
            try:
                shape = _shape(_at(batch, path))
                if shape is not None and len(shape) > d:
                    return shape[d]
            except Exception:
                pass
        shapes: List[Tuple[Path, Tuple[int, ...]]] = []
        _collect(batch, (), shapes, 0)
        if not shapes:
            if isinstance(batch, (list, tuple)) and not any(_is_mapping(v) or isinstance(v, (list, tuple)) for v in batch):
                self.how = "len"
                return len(batch)
            return None
        hint = self.hint if self.hint is not None else knob_batch_size()
        if hint is not None:
            for d in range(4):
                for path, shape in shapes:
                    if len(shape) > d and shape[d] == hint:
                        self._where, self.how = (path, d), "hint"
                        return hint
        first0 = shapes[0][1][0]
        if all(shape[0] == first0 for _, shape in shapes):
            self._where, self.how = (shapes[0][0], 0), "dim0"
            return first0
        wide = [(path, shape) for path, shape in shapes if len(shape) >= 2]
        if len(wide) >= 2 and all(shape[1] == wide[0][1][1] for _, shape in wide):
            b = wide[0][1][1]
            flat = [shape for _, shape in shapes if len(shape) == 1]
            if all(s[0] in (b, b * wide[0][1][0]) for s in flat):
                self._where, self.how = (wide[0][0], 1), "dim1"
                return b
        self.how = None
        return None


def batch_samples(batch: Any, hint: Optional[int] = None) -> Optional[int]:
    """Samples in one batch (see the module's rules). None when unknown.

        batch_samples((torch.zeros(35, 20), torch.zeros(35, 20)), hint=20)   # 20
    """
    return BatchDim(hint)(batch)
