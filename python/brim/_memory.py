"""Memory as the process and its framework see it, for step messages. Never imports a framework:
torch is looked up only when the job has imported it, and nothing here waits for the device."""

import os
import sys
from typing import Dict, Union


def snapshot() -> Dict[str, Union[int, str]]:
    """Allocator memory of the current CUDA device (allocated, reserved, peaks) when the job uses
    CUDA, and the process's RSS and peak RSS."""
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
    try:
        with open("/proc/self/statm", "rb") as f:
            mem["rss"] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except Exception:
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        mem["peak_rss"] = int(peak if sys.platform == "darwin" else peak * 1024)
    except Exception:
        pass
    return mem
