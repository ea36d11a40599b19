"""Knobs every torch job has without a key of its own (the `jobWide` entries of src/knobs/specs.ts;
test/knobs/specs.test.ts holds `JOB_WIDE` to them). The attach sets a trial's value when torch is
imported, before any op runs, and reports the value in force once the process builds an optimizer: a
launcher that imports torch (torchrun) is no training process and says nothing. A job that sets one
itself after import runs its own value, and that value is its configuration."""

from typing import Any, Callable, Dict, NamedTuple, Optional

from . import _env, _state

#: the knobs, in the order of src/knobs/specs.ts
JOB_WIDE = ("cpu_threads", "matmul_precision")


class _Knob(NamedTuple):
    name: str
    get: Callable[[Any], Any]
    put: Callable[[Any, Any], None]
    valid: Callable[[Any], bool]
    #: said only by a process whose optimizer holds parameters on a GPU (a setting of CUDA matmuls)
    gpu_only: bool


def _set_threads(torch: Any, value: Any) -> None:
    torch.set_num_threads(int(value))


def _set_matmul(torch: Any, value: Any) -> None:
    torch.set_float32_matmul_precision(str(value))


_KNOBS = (
    _Knob("cpu_threads", lambda torch: int(torch.get_num_threads()), _set_threads,
          lambda v: isinstance(v, int) and v >= 1, False),
    _Knob("matmul_precision", lambda torch: str(torch.get_float32_matmul_precision()), _set_matmul,
          lambda v: v in ("highest", "high", "medium"), True),
)

_seen: Dict[str, Dict[str, Any]] = {}


def set_at_import(torch: Any) -> None:
    """Each knob's trial value set now, where BRIM_KNOBS gives one; what is in force kept for the report.
    A torch without the setting (1.13 has both) leaves that knob out."""
    values = _env.knobs()
    for knob in _KNOBS:
        try:
            current = knob.get(torch)
        except Exception:
            continue
        wanted = current
        if values.get(knob.name) is not None:
            wanted = _env.cast_knob(knob.name, values[knob.name], current)
            if knob.valid(wanted) and wanted != current:
                knob.put(torch, wanted)
            else:
                wanted = current
        source = "knobs" if wanted != current or knob.name in values else "default"
        _seen[knob.name] = {"value": wanted, "default": current, "source": source, "torch": torch}


def _on_gpu(optimizer: Any) -> bool:
    for group in getattr(optimizer, "param_groups", ()):
        for param in group.get("params", ()):
            return bool(getattr(param, "is_cuda", False))
    return False


def report(optimizer: Optional[Any] = None) -> None:
    """At an optimizer's build: each knob's value in force, once per process (a GPU-only knob once the
    optimizer holds GPU parameters)."""
    for knob in _KNOBS:
        seen = _seen.get(knob.name)
        if seen is None or seen.get("said") or (knob.gpu_only and not _on_gpu(optimizer)):
            continue
        seen["said"] = True
        value, default, source = seen["value"], seen["default"], seen["source"]
        try:
            now = knob.get(seen["torch"])
        except Exception:
            now = value
        if now != value:
            value, default, source = now, now, "code"
        _state.note_knob(knob.name, value, default, source)
