"""Runs a training script, unchanged, with PyTorch's CUDA memory history recorded, and summarises
what was allocated at the moment of the peak: the GPU-only allocations a CPU run cannot show
(issue 26, item 5: name them, so the planner can model them).

    python bench/gpu/memory_history.py --summary out.json [--pickle out.pickle] [--cpp]
        [--max-entries N] -- <script.py | -m module> [args...]
    python bench/gpu/memory_history.py --summarize snapshot.pickle      # a snapshot made before

The script runs in this process (runpy), after torch.cuda.memory._record_memory_history(); when it
ends, however it ends (brim run --steps N stops it at N steps), the snapshot is taken and the
summary written. Without CUDA the summary says so and nothing else. --cpp records C++ frames too
(names cuDNN and cuBLAS allocations by their functions; symbolising them at the end takes time).

The summary replays the trace (alloc, free_completed; segment_alloc, segment_free) to the moment
allocated bytes peak, and groups the allocations live then by where they were made: optimizer,
backward (the autograd engine, whose CUDA thread has no Python frames), cuDNN or cuBLAS (C++
frames only), the forward by module file (conv, rnn, linear...), or other. It lists the largest
ones with their first frames and how long they lived (a workspace lives for one op).
"""
import json
import os
import pickle
import runpy
import sys
from typing import Any, Dict, List, Optional, Tuple

TOP = 15


def _frames(entry: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [f for f in entry.get("frames") or [] if isinstance(f, dict)]


def category(frames: List[Dict[str, Any]]) -> str:
    """Where an allocation was made, from its frames (innermost first, as PyTorch records them)."""
    names = [str(f.get("name", "")) for f in frames]
    files = [str(f.get("filename", "")).replace("\\", "/") for f in frames]
    if any("cudnn" in n.lower() for n in names):
        return "cudnn"
    if any("cublas" in n.lower() for n in names):
        return "cublas"
    if any("/torch/optim/" in f for f in files):
        return "optimizer"
    python = [f for f in files if f.endswith(".py")]
    if not python:
        return "backward (autograd engine) or C++"
    if any("/torch/autograd/" in f for f in python) or any(n in ("backward", "run_backward", "_engine_run_backward") for n in names):
        return "backward"
    for f in python:
        if "/torch/nn/modules/" in f:
            return "forward: " + os.path.splitext(os.path.basename(f))[0]
        if f.endswith("/torch/nn/functional.py"):
            return "forward: functional"
    user = [f for f in python if "/site-packages/" not in f and "/torch/" not in f]
    return "other: " + (os.path.basename(user[0]) if user else os.path.basename(python[0]))


def _where(frames: List[Dict[str, Any]], n: int = 3) -> List[str]:
    return ["%s:%s %s" % (os.path.basename(str(f.get("filename", "?"))), f.get("line", "?"), f.get("name", "?")) for f in frames[:n]]


def summarize(snapshot: Dict[str, Any], max_entries: Optional[int] = None) -> Dict[str, Any]:
    """The peak of allocated bytes in the snapshot's trace and what was live then, by where it was made."""
    traces = snapshot.get("device_traces") or []
    device = max(range(len(traces)), key=lambda i: len(traces[i]), default=None)
    trace = traces[device] if device is not None else []
    live: Dict[int, Tuple[int, int, Dict[str, Any]]] = {}  # addr -> (size, index, entry)
    freed_at: Dict[int, int] = {}  # index of the alloc -> index of its free
    allocated = reserved = 0
    peak = peak_reserved = 0
    peak_index = -1
    at_peak: List[Tuple[int, int, Dict[str, Any]]] = []
    for i, e in enumerate(trace):
        action, size, addr = e.get("action"), int(e.get("size", 0)), e.get("addr")
        if action == "alloc":
            live[addr] = (size, i, e)
            allocated += size
            if allocated > peak:
                peak, peak_index = allocated, i
                at_peak = list(live.values())
        elif action == "free_completed" and addr in live:
            size0, index, _ = live.pop(addr)
            allocated -= size0
            freed_at[index] = i
        elif action in ("segment_alloc", "segment_map"):
            reserved += size
            peak_reserved = max(peak_reserved, reserved)
        elif action in ("segment_free", "segment_unmap"):
            reserved -= size
    by_category: Dict[str, int] = {}
    for size, _, e in at_peak:
        c = category(_frames(e))
        by_category[c] = by_category.get(c, 0) + size
    top = sorted(at_peak, key=lambda x: -x[0])[:TOP]
    segments = snapshot.get("segments") or []
    return {
        "device": device,
        "trace_entries": len(trace),
        # a full ring buffer lost its oldest entries: what was allocated before them is not counted
        "trace_complete": max_entries is None or len(trace) < max_entries,
        "peak_allocated_bytes": peak,
        "peak_at_entry": peak_index,
        "peak_reserved_bytes_traced": peak_reserved,
        "live_at_peak": len(at_peak),
        "by_category_at_peak": dict(sorted(by_category.items(), key=lambda kv: -kv[1])),
        "largest_at_peak": [
            {
                "bytes": size,
                "category": category(_frames(e)),
                "allocated_at_entry": index,
                "lived_entries": (freed_at[index] - index) if index in freed_at else None,
                "frames": _where(_frames(e)),
            }
            for size, index, e in top
        ],
        "segments_at_end": {
            "count": len(segments),
            "reserved_bytes": sum(int(s.get("total_size", 0)) for s in segments),
            "allocated_bytes": sum(int(s.get("allocated_size", 0)) for s in segments),
        },
    }


def _write(path: str, obj: Any) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main(argv: List[str]) -> int:
    if argv[:1] == ["--summarize"] and len(argv) == 2:
        with open(argv[1], "rb") as f:
            print(json.dumps(summarize(pickle.load(f)), indent=1))
        return 0
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    opts, command = argv[: argv.index("--")], argv[argv.index("--") + 1:]
    summary_path = pickle_path = None
    max_entries, cpp = 1_000_000, False
    i = 0
    while i < len(opts):
        if opts[i] == "--summary":
            summary_path, i = opts[i + 1], i + 2
        elif opts[i] == "--pickle":
            pickle_path, i = opts[i + 1], i + 2
        elif opts[i] == "--max-entries":
            max_entries, i = int(opts[i + 1]), i + 2
        elif opts[i] == "--cpp":
            cpp, i = True, i + 1
        else:
            print("memory_history.py: unknown option %s" % opts[i], file=sys.stderr)
            return 2
    if summary_path is None or not command:
        print("memory_history.py: give --summary <path> and the script after --", file=sys.stderr)
        return 2
    import torch

    recording = torch.cuda.is_available()
    if recording:
        torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks="all" if cpp else "python")
    try:
        if command[0] == "-m":
            sys.argv = command[1:]
            runpy.run_module(command[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = command
            sys.path.insert(0, os.path.dirname(os.path.abspath(command[0])))
            runpy.run_path(command[0], run_name="__main__")
    finally:
        if not recording:
            _write(summary_path, {"cuda": False, "torch": torch.__version__, "why": "no CUDA device: nothing to record"})
        else:
            snapshot = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            if pickle_path:
                with open(pickle_path, "wb") as f:
                    pickle.dump(snapshot, f)
            _write(summary_path, {"cuda": True, "torch": torch.__version__, "stacks": "all" if cpp else "python",
                                  **summarize(snapshot, max_entries)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
