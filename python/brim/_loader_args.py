"""A tune trial's arguments for the job's training DataLoader (BRIM_LOADER_ARGS).

brim tune varies loader settings the job decides in its code (`persistent_workers`, `prefetch_factor`,
`pin_memory`, `num_workers`) without touching the file: the trial's environment names the file:line
that builds the DataLoader and the values to give it, and the attach passes them to that one
DataLoader as it is built. A loader with no workers keeps the defaults of the settings that need
workers (PyTorch refuses them otherwise).
"""

import inspect
import json
import os
from typing import Any, Dict, Optional, Tuple

_NEED_WORKERS = ("persistent_workers", "prefetch_factor")
_parsed = None  # type: Optional[Dict[str, Dict[str, Any]]]


def wanted(where: Optional[str]) -> Optional[Dict[str, Any]]:
    """The arguments this trial gives the DataLoader built at `where` (file:line), or None."""
    global _parsed
    if _parsed is None:
        _parsed = {}
        try:
            for edit in json.loads(os.environ.get("BRIM_LOADER_ARGS") or "[]"):
                place = "%s:%d" % (os.path.abspath(str(edit["file"])), int(edit["line"]))
                _parsed.setdefault(place, {})[str(edit["name"])] = edit["value"]
        except Exception:
            _parsed = {}
    return _parsed.get(where) if where is not None else None


def with_arguments(init: Any, self: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                   values: Dict[str, Any]) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
    """The call's arguments with `values` put in, by name, whether the job passed them by position,
    by keyword or not at all."""
    signature = inspect.signature(init)
    bound = signature.bind(self, *args, **kwargs)
    for name, value in values.items():
        if name in signature.parameters:
            bound.arguments[name] = value
    workers = bound.arguments.get("num_workers", signature.parameters["num_workers"].default)
    if not workers:
        for name in _NEED_WORKERS:
            bound.arguments.pop(name, None)
    return tuple(bound.args[1:]), dict(bound.kwargs)


def reset() -> None:
    """Forget the parsed environment (tests)."""
    global _parsed
    _parsed = None
