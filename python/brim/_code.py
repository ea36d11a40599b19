"""Knobs written as literals in the job's code, varied for one tune trial without touching the file.

brim tune finds a knob the job decides in its code (`DataLoader(ds, batch_size=20)`, a JAX loop's
`batch_size = 128`) and, for a trial that tries another value, sets BRIM_CODE_KNOBS to a JSON list
of edits: `{"file": <absolute path>, "line": <1-based>, "name": "batch_size", "value": 64}`. Each
edit replaces the literal after `name =` on that line of that file, in memory only:

- a module the job imports (or runs with `python -m`) is compiled from the edited source by an
  import finder placed first on sys.meta_path;
- the script Python was asked to run (`python train.py`) is read by the interpreter itself, so brim's
  sitecustomize runs the edited script as `__main__` in its place and then ends the process the way
  the interpreter would (exit status, atexit, non-daemon threads).

An edit whose line no longer holds `name = <integer>` is said on stderr and left out: the trial then
runs the code as written, and brim's check of the samples per step rejects it.
"""

import importlib.machinery
import importlib.util
import json
import os
import re
import sys
from types import CodeType, ModuleType
from typing import Any, Dict, List, Optional, Sequence

from . import _env


def edits_from_env(text: Optional[str]) -> Dict[str, List[Dict[str, Any]]]:
    """The edits of BRIM_CODE_KNOBS grouped by the real path of their file; empty when unset or malformed."""
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except ValueError:
        sys.stderr.write("brim: warning: %s is not JSON; the code runs as written\n" % _env.ENV_CODE_KNOBS)
        return {}
    edits: Dict[str, List[Dict[str, Any]]] = {}
    for edit in parsed if isinstance(parsed, list) else []:
        if not isinstance(edit, dict) or not isinstance(edit.get("file"), str) or not isinstance(edit.get("line"), int):
            continue
        if not isinstance(edit.get("name"), str) or not isinstance(edit.get("value"), int) or isinstance(edit.get("value"), bool):
            continue
        edits.setdefault(os.path.realpath(edit["file"]), []).append(edit)
    return edits


def edit_source(source: str, edits: Sequence[Dict[str, Any]], path: str = "") -> str:
    """`source` with each edit's literal replaced on its line; a line that does not match is said and kept.

    >>> edit_source("a = 1\\nloader = DataLoader(ds, batch_size=20)\\n", [{"line": 2, "name": "batch_size", "value": 64}])
    'a = 1\\nloader = DataLoader(ds, batch_size=64)\\n'
    """
    lines = source.splitlines(keepends=True)
    for edit in edits:
        at = edit["line"] - 1
        pattern = re.compile(r"(\b%s\s*=\s*)\d+\b(?!\s*[.\d])" % re.escape(edit["name"]))
        code, hash_, comment = lines[at].partition("#") if 0 <= at < len(lines) else ("", "", "")
        if pattern.search(code):
            # the code before a comment only: the comment may quote the old value
            lines[at] = pattern.sub(lambda m: m.group(1) + str(edit["value"]), code, count=1) + hash_ + comment
        else:
            sys.stderr.write(
                "brim: warning: %s:%d no longer holds %s = <integer>; this trial runs the code as written\n"
                % (path, edit["line"], edit["name"])
            )
    return "".join(lines)


class _EditedLoader(importlib.machinery.SourceFileLoader):
    """Compiles the module from its edited source, never from (or into) the bytecode cache."""

    def __init__(self, fullname: str, path: str, edits: Sequence[Dict[str, Any]]) -> None:
        super().__init__(fullname, path)
        self._edits = edits

    def get_code(self, fullname: str) -> CodeType:
        source = importlib.util.decode_source(self.get_data(self.path))
        return compile(edit_source(source, self._edits, self.path), self.path, "exec", dont_inherit=True)


class _EditedFinder:
    """First on sys.meta_path: a module whose file has edits is loaded by _EditedLoader."""

    def __init__(self, edits: Dict[str, List[Dict[str, Any]]]) -> None:
        self._edits = edits
        self._stems = {os.path.splitext(os.path.basename(path))[0] for path in edits}

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None, target: Optional[ModuleType] = None) -> Any:
        if fullname.rpartition(".")[2] not in self._stems:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.origin is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        edits = self._edits.get(os.path.realpath(spec.origin))
        if edits is None:
            return None
        spec.loader = _EditedLoader(fullname, spec.origin, edits)
        return spec


def _exit_status(error: SystemExit) -> int:
    """The status the interpreter gives a SystemExit: None 0, an int itself, anything else printed and 1."""
    if error.code is None:
        return 0
    if isinstance(error.code, int):
        return error.code
    sys.stderr.write("%s\n" % error.code)
    return 1


def _finish(status: int) -> None:
    """End the process as the interpreter ends it after the main script: threads, atexit, streams."""
    import atexit
    import threading

    try:
        shutdown = getattr(threading, "_shutdown", None)
        if shutdown is not None:
            shutdown()
    except BaseException:
        pass
    run = getattr(atexit, "_run_exitfuncs", None)
    if run is not None:
        run()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status)


def _run_main(script: str, edits: Sequence[Dict[str, Any]]) -> None:
    """Run the edited main script as `__main__`, as the interpreter would have run the file, then end."""
    path = os.path.abspath(script)
    with open(path, "rb") as f:
        source = importlib.util.decode_source(f.read())
    code = compile(edit_source(source, edits, path), path, "exec", dont_inherit=True)
    main = sys.modules["__main__"]
    main.__dict__.update({"__file__": path, "__cached__": None, "__package__": None, "__spec__": None})
    main.__dict__.setdefault("__builtins__", __builtins__)
    sys.path.insert(0, os.path.dirname(os.path.realpath(path)))
    status = 0
    try:
        exec(code, main.__dict__)
    except SystemExit as e:
        status = _exit_status(e)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        status = 130
    except BaseException:
        sys.excepthook(*sys.exc_info())
        status = 1
    _finish(status)


def install(env_text: Optional[str] = None, argv: Optional[Sequence[str]] = None) -> None:
    """Apply BRIM_CODE_KNOBS: the import finder, and the main script run edited (this call then never returns)."""
    edits = edits_from_env(_env.code_knobs_text() if env_text is None else env_text)
    if not edits:
        return
    sys.meta_path.insert(0, _EditedFinder(edits))
    args = sys.argv if argv is None else argv
    script = args[0] if args else ""
    if script in ("", "-c", "-m", "-") or not os.path.isfile(script):
        return
    real = os.path.realpath(script)
    if real in edits:
        _run_main(script, edits[real])
