"""brim.knob(): the current trial's knob values."""

from typing import Any, TypeVar

from . import _env, _state

T = TypeVar("T")


def knob(name: str, default: T) -> T:
    """The current trial's value of knob `name` (from BRIM_KNOBS), cast to the type of
    `default`; `default` when the knob is absent or null. Raises KnobError when the value cannot
    be cast (a trial must not silently run with the default). Works without a channel too, so a
    job can be driven by hand: BRIM_KNOBS='{"batch_size": 128}' python train.py

        batch_size = brim.knob("batch_size", default=64)
    """
    values = _env.knobs()
    value: Any
    if name not in values or values[name] is None:
        value, source = default, "default"
    else:
        value, source = _env.cast_knob(name, values[name], default), "knobs"
    _state.note_knob(name, value, default, source)
    return value
