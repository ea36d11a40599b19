"""A tune trial's arguments for the job's training DataLoader (BRIM_LOADER_ARGS).

brim tune varies loader settings the job decides in its code (`persistent_workers`, `prefetch_factor`,
`pin_memory`, `num_workers`) without touching the file: the trial's environment names the file:line
that builds the DataLoader and the values to give it, and the attach passes them to that one
DataLoader as it is built. A loader with no workers keeps the defaults of the settings that need
workers (PyTorch refuses them otherwise).

Where a loader's `num_workers` comes from (workers_source): the job's own command-line option, read
from the file that builds the loader (its `num_workers=args.threads` and the `add_argument("-j",
"--threads")` that declares it), so that the tune can vary workers under a flag it does not know.
"""

import ast
import inspect
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from . import _env

_NEED_WORKERS = ("persistent_workers", "prefetch_factor")
_parsed = None  # type: Optional[Dict[str, Dict[str, Any]]]


def wanted(where: Optional[str]) -> Optional[Dict[str, Any]]:
    """The arguments this trial gives the DataLoader built at `where` (file:line), or None."""
    global _parsed
    if _parsed is None:
        _parsed = {}
        try:
            for edit in json.loads(_env.loader_args_text()):
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


_trees: Dict[str, Any] = {}


def _tree(path: str) -> Any:
    if path not in _trees:
        try:
            with open(path, encoding="utf-8") as f:
                _trees[path] = ast.parse(f.read(), path)
        except Exception:
            _trees[path] = None
    return _trees[path]


def _workers_expr(tree: Any, line: int) -> Any:
    """The `num_workers=` expression of the innermost call spanning `line`."""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno <= line <= (node.end_lineno or node.lineno):
            for kw in node.keywords:
                if kw.arg == "num_workers" and (best is None or node.lineno >= best[0]):
                    best = (node.lineno, kw.value)
    return best[1] if best is not None else None


def _attribute(expr: Any, tree: Any, depth: int = 0) -> Optional[str]:
    """The attribute an expression reads from a namespace (`args.threads`, `int(opt.j)`), following
    one plain name back to its assignment in the same file."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return node.attr
    if depth == 0 and isinstance(expr, ast.Name):
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets):
                return _attribute(node.value, tree, 1)
    return None


def _option_dest(call: Any) -> Tuple[Optional[str], List[str]]:
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")]
    for kw in call.keywords:
        if kw.arg == "dest" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value, flags
    longs = [f for f in flags if f.startswith("--")]
    name = (longs or flags or [""])[0].lstrip("-").replace("-", "_")
    return (name or None), flags


def workers_source(where: Optional[str]) -> Optional[Dict[str, Any]]:
    """The command-line option the DataLoader built at `where` (file:line) takes its num_workers
    from, when the same file declares it with argparse: {"dest", "flags", "expr"}; else None.

        DataLoader(ds, num_workers=args.threads)   # with p.add_argument("-j", "--threads", type=int)
        workers_source("train.py:40")            # {"dest": "threads", "flags": ["-j", "--threads"], ...}
    """
    if where is None or ":" not in where:
        return None
    path, _, line = where.rpartition(":")
    tree = _tree(path)
    if tree is None or not line.isdigit():
        return None
    expr = _workers_expr(tree, int(line))
    attr = _attribute(expr, tree) if expr is not None else None
    if attr is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            dest, flags = _option_dest(node)
            if dest == attr and flags:
                return {"dest": dest, "flags": flags, "expr": ast.unparse(expr)}
    return None
