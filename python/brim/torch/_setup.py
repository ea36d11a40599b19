"""Process-level switches: memory cap, TF32 / cudnn.benchmark, DataLoader settings."""

from typing import Any, Dict, Optional, Union, cast

import torch

import brim
from brim import _env

_GiB = 1 << 30
_DEFAULT_OVERHEAD = 512 << 20  # CUDA context etc. outside the caching allocator, when not measurable


def apply_cap(cap_bytes: Optional[int] = None, fraction: Optional[float] = None,
              device: Union[None, int, str, "torch.device"] = None, measure_overhead: bool = True) -> Dict[str, Any]:
    """Keep this process's CUDA caching allocator under the memory cap.

    The cap is `cap_bytes` / BRIM_MEMORY_CAP_BYTES (bytes the whole process may hold, as NVML
    counts it) or `fraction` / BRIM_MEMORY_CAP_FRACTION (of the device's total memory). A byte cap
    is turned into an allocator limit by subtracting the memory the process holds outside the
    allocator (CUDA context, libraries): BRIM_MEMORY_CAP_OVERHEAD_BYTES when set, else measured
    now as device total - free - reserved (which assumes no other process uses the device; taken
    only when below 4 GiB), else 512 MiB. Then torch.cuda.set_per_process_memory_fraction(limit /
    total): the allocator raises its out-of-memory error beyond it, which TrainStep recovers from.
    measure_overhead=False skips the measurement (it creates a CUDA context on `device`).

    Returns a dict of what was done; {"applied": False, ...} without a cap or without CUDA (on CPU
    brim enforces a RAM cap from outside)."""
    if cap_bytes is None and fraction is None:
        cap_bytes = _env.memory_cap_bytes()
        if cap_bytes is None:
            fraction = _env.memory_cap_fraction()
    if cap_bytes is None and fraction is None:
        return {"applied": False, "reason": "no cap set"}
    if not torch.cuda.is_available():
        out: Dict[str, Any] = {"applied": False, "reason": "no CUDA device; brim enforces the cap on RAM from outside",
                               "device": "cpu", "cap_bytes": cap_bytes, "fraction": fraction}
        brim.event("cap_applied", **out)
        return out
    dev = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    total = int(torch.cuda.get_device_properties(index).total_memory)
    out = {"applied": True, "device": "cuda:%d" % index, "total_bytes": total}
    if cap_bytes is not None:
        overhead = _env.memory_cap_overhead_bytes()
        source = "env"
        if overhead is None and measure_overhead:
            try:
                torch.cuda.init()
                torch.empty(1, device=dev)  # make sure the context exists before measuring
                free, _total = torch.cuda.mem_get_info(index)
                measured = int(_total - free - torch.cuda.memory_reserved(index))
                if 0 <= measured < 4 * _GiB:
                    overhead, source = measured, "measured"
            except Exception:
                pass
        if overhead is None:
            overhead, source = _DEFAULT_OVERHEAD, "default"
        limit = max(0, int(cap_bytes) - overhead)
        frac = min(1.0, limit / float(total))
        out.update(cap_bytes=int(cap_bytes), overhead_bytes=int(overhead), overhead_source=source,
                   allocator_limit_bytes=int(frac * total))
    else:
        frac = float(cast(float, fraction))  # no cap_bytes: a fraction is set
        out.update(allocator_limit_bytes=int(frac * total))
    torch.cuda.set_per_process_memory_fraction(frac, index)
    out["fraction"] = frac
    brim.event("cap_applied", **out)
    return out


def configure(tf32: Optional[bool] = None, cudnn_benchmark: Optional[bool] = None) -> Dict[str, bool]:
    """Switch TF32 matmuls/convolutions and cudnn.benchmark. None = the knob of the same name
    ("tf32", "cudnn_benchmark") when the trial sets it, else leave PyTorch's setting alone.
    Returns the settings in force afterwards."""
    if tf32 is None and "tf32" in brim.knobs():
        tf32 = brim.knob("tf32", False)
    if cudnn_benchmark is None and "cudnn_benchmark" in brim.knobs():
        cudnn_benchmark = brim.knob("cudnn_benchmark", False)
    if tf32 is not None:
        torch.backends.cuda.matmul.allow_tf32 = bool(tf32)
        torch.backends.cudnn.allow_tf32 = bool(tf32)
        if hasattr(torch, "set_float32_matmul_precision"):
            torch.set_float32_matmul_precision("high" if tf32 else "highest")
    if cudnn_benchmark is not None:
        torch.backends.cudnn.benchmark = bool(cudnn_benchmark)
    return {"tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark)}


def loader_kwargs(num_workers: int = 0, pin_memory: bool = False, persistent_workers: bool = False,
                  prefetch_factor: Optional[int] = None) -> Dict[str, Any]:
    """Keyword arguments for torch.utils.data.DataLoader, each overridden by the trial's knob of
    the same name. Only combinations valid on torch 1.13 and 2.x are returned: persistent_workers
    and prefetch_factor only with workers; pin_memory only when CUDA is available."""
    num_workers = max(0, brim.knob("num_workers", int(num_workers)))
    pin_memory = brim.knob("pin_memory", bool(pin_memory))
    persistent_workers = brim.knob("persistent_workers", bool(persistent_workers))
    prefetch_factor = brim.knob("prefetch_factor", prefetch_factor)
    out = {"num_workers": num_workers, "pin_memory": bool(pin_memory) and torch.cuda.is_available()}
    if num_workers > 0:
        out["persistent_workers"] = bool(persistent_workers)
        if prefetch_factor is not None:
            out["prefetch_factor"] = max(1, int(prefetch_factor))
    return out
