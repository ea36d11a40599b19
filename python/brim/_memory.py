"""Memory as the process and its framework see it, for step messages. Never imports a framework:
torch is looked up only when the job has imported it, and nothing here waits for the device."""

import os
import sys
import time
from typing import Dict, Optional, Tuple, Union

RSS_EVERY_S = 0.25  # brim's sampler reads the tree's RSS at 10 Hz anyway; per step it would cost a file read
_rss_cache: Dict[str, Optional[Tuple[float, int, int]]] = {"last": None}


def _rss() -> Tuple[Optional[int], Optional[int]]:
    now = time.monotonic()
    last = _rss_cache["last"]
    if last is not None and now - last[0] < RSS_EVERY_S:
        return last[1], last[2]
    rss = peak_rss = None
    try:
        with open("/proc/self/statm", "rb") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except Exception:
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak_rss = int(peak if sys.platform == "darwin" else peak * 1024)
    except Exception:
        pass
    if rss is not None and peak_rss is not None:
        _rss_cache["last"] = (now, rss, peak_rss)
    return rss, peak_rss


def snapshot() -> Dict[str, Union[int, str]]:
    """Allocator memory of the current CUDA device (allocated, reserved, peaks) when the job uses
    CUDA, and the process's RSS and peak RSS (read at most every RSS_EVERY_S seconds)."""
    mem: Dict[str, Union[int, str]] = {}
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            cuda = torch.cuda
            if cuda.is_initialized():
                dev = cuda.current_device()
                mem["device"] = "cuda:%d" % dev
                mem["allocated"] = int(cuda.memory_allocated(dev))
                mem["reserved"] = int(cuda.memory_reserved(dev))
                mem["peak"] = int(cuda.max_memory_allocated(dev))
                mem["peak_reserved"] = int(cuda.max_memory_reserved(dev))
        except Exception:
            mem = {}
    mem.setdefault("device", "cpu")
    rss, peak_rss = _rss()
    if rss is not None:
        mem["rss"] = rss
    if peak_rss is not None:
        mem["peak_rss"] = peak_rss
    return mem
