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


_stack_files = []


def _stack_dump() -> None:
    """When the job stalls (every rank quiet: a collective one rank never joined), brim sends the
    signal of BRIM_STACKS_SIGNAL (a real-time one: SIGUSR1 is Lightning's SLURM requeue) to each
    stepping process: faulthandler then writes the Python stacks of all its threads to
    BRIM_STACKS_DIR/stacks-<pid>.txt, from C, even while the main thread is blocked in a collective.
    Only where the signal is free (a job's own handler is left alone); brim signals only a process whose
    handler it sees in /proc, and removes the files nobody wrote to."""
    folder = os.environ.get("BRIM_STACKS_DIR")
    if not folder or not os.path.isdir(folder):
        return
    try:
        import faulthandler
        import signal

        number = int(os.environ.get("BRIM_STACKS_SIGNAL", "0"))
        if not (signal.SIGRTMIN <= number <= signal.SIGRTMAX) or signal.getsignal(number) not in (signal.SIG_DFL, None):
            return
        fd = os.open(os.path.join(folder, "stacks-%d.txt" % os.getpid()), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        f = os.fdopen(fd, "w")
        faulthandler.register(number, file=f, all_threads=True, chain=False)
        _stack_files.append(f)
    except Exception:
        pass


_run_shadowed_sitecustomize()
_line_buffered()
_stack_dump()
_attach()


def _code_knobs() -> None:
    """A tune trial that varies a value written in the job's code (BRIM_CODE_KNOBS): the edited
    source is what runs; for the main script this runs it here and ends the process (brim._code)."""
    if not os.environ.get("BRIM_CODE_KNOBS") or not os.environ.get("BRIM_CHANNEL"):
        return
    try:
        from brim import _code
    except Exception as e:
        sys.stderr.write("brim: warning: could not vary the values in the code (%s: %s); the code runs as written\n" % (type(e).__name__, e))
        return
    _code.install()


_code_knobs()
