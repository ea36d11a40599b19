"""Putting brim's wrappers on a library's functions, once each.

The work happens when the library is imported: the wrapper that `make` returns is all the job's
hot path ever runs (no extra call, lock or copy).
"""

import functools
from typing import Any, Callable

MARK = "_brim_attach"


def is_wrapped(fn: Any) -> bool:
    """Whether `fn` is one of brim's wrappers (functools.wraps carries the mark to a wrapper of it)."""
    return bool(getattr(fn, MARK, False))


def wrap_once(owner: Any, name: str, make: Callable[[Any], Callable[..., Any]]) -> None:
    """Replace `owner.name` with `make(original)`, which takes the original's name, doc and
    `__wrapped__` and brim's mark; nothing when it is missing or brim's wrapper is already there."""
    original = getattr(owner, name, None)
    if original is None or is_wrapped(original):
        return
    wrapper = functools.wraps(original)(make(original))
    setattr(wrapper, MARK, True)
    setattr(owner, name, wrapper)
