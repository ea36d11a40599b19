"""JAX's memory cap: environment variables that must be set before JAX initialises its backend."""

import sys
from typing import Dict, Optional

from . import _env, _state


def apply_jax_cap(fraction: Optional[float] = None) -> Dict[str, str]:
    """Set XLA_PYTHON_CLIENT_PREALLOCATE=false and XLA_PYTHON_CLIENT_MEM_FRACTION from
    BRIM_MEMORY_CAP_FRACTION (or `fraction`) unless already set. Returns the variables set. Must
    run before JAX touches the GPU; brim's job runner normally sets them itself.

        brim.apply_jax_cap(0.5)   # {'XLA_PYTHON_CLIENT_PREALLOCATE': 'false', 'XLA_PYTHON_CLIENT_MEM_FRACTION': '0.5000'}
    """
    out: Dict[str, str] = {}
    if fraction is None:
        fraction = _env.memory_cap_fraction()
    if "jax" in sys.modules:
        _env.warn_once("jax-cap", "apply_jax_cap() called after jax was imported; it may have no effect")
    wanted = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    if fraction is not None:
        wanted["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "%.4f" % fraction
    for name, value in wanted.items():
        if _env.set_default(name, value) is not None:
            out[name] = value
    if out:
        _state.event("cap_applied", framework="jax", env=out)
    return out
