"""brim's start-up hook for unmodified Python jobs (docs/attach.md).

brim's job runner puts this folder first on PYTHONPATH. Python imports the first `sitecustomize`
it finds, so this one first runs the one it shadows (the user's or the distribution's, found
further on the path), then, only under brim (BRIM_CHANNEL set and BRIM_ATTACH not 0), installs
brim's import hook. It imports nothing heavy and never torch; any failure is one warning line.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run_shadowed_sitecustomize() -> None:
    import importlib.machinery
    import importlib.util

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    ours = sys.modules.get("sitecustomize")
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # what site.py does with a failing sitecustomize
        sys.modules["sitecustomize"] = ours
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n" % (type(e).__name__, e))


def _line_buffered() -> None:
    """brim sets PYTHONUNBUFFERED so that the job's output shows as it comes; unbuffered, print()
    writes its words and its newline apart, and the lines of processes sharing a pipe (torchrun's
    ranks) cut into each other. Line buffering shows output as soon, a whole line per write."""
    if os.environ.get("BRIM_LINE_BUFFERED") != "1":
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True, write_through=False)
        except Exception:
            pass


def _attach() -> None:
    if not os.environ.get("BRIM_CHANNEL") or os.environ.get("BRIM_ATTACH", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    try:
        from brim import _attach

        _attach.install()
    except Exception as e:
        sys.stderr.write("brim: warning: could not attach to this job (%s: %s); it runs unmeasured by attach\n"
                         % (type(e).__name__, e))


_run_shadowed_sitecustomize()
_line_buffered()
_attach()
