"""Environment variables the SDK reads, and the warning helper. Standard library only.

The one Python reader of the job's environment: brim's variables (src/job/contract.ts is the table of
them) and those a launcher sets (torchrun, SLURM, Lightning; `LAUNCHER_VARIABLES`): every other
module asks here. The only exception is python/_brim_boot/sitecustomize.py, which decides whether to
import brim at all and so cannot import it first; a test holds its words to these."""

import json
import math
import os
import sys
from typing import Any, Dict, FrozenSet, List, NoReturn, Optional, Set, Tuple

ENV_CHANNEL = "BRIM_CHANNEL"
ENV_CHANNEL_TOKEN = "BRIM_CHANNEL_TOKEN"
ENV_KNOBS = "BRIM_KNOBS"
ENV_KNOBS_FILE = "BRIM_KNOBS_FILE"
ENV_STEP_BUDGET = "BRIM_STEP_BUDGET"
ENV_WARMUP_STEPS = "BRIM_WARMUP_STEPS"
ENV_SEED = "BRIM_SEED"
ENV_MEMORY_CAP_BYTES = "BRIM_MEMORY_CAP_BYTES"
ENV_MEMORY_CAP_FRACTION = "BRIM_MEMORY_CAP_FRACTION"
ENV_MEMORY_CAP_OVERHEAD_BYTES = "BRIM_MEMORY_CAP_OVERHEAD_BYTES"
ENV_RUN_ID = "BRIM_RUN_ID"
ENV_FAULT_OOM_AT_STEP = "BRIM_FAULT_OOM_AT_STEP"
ENV_FAULT_OOM_PHASE = "BRIM_FAULT_OOM_PHASE"
ENV_ATTACH = "BRIM_ATTACH"
ENV_CODE_KNOBS = "BRIM_CODE_KNOBS"
ENV_LOADER_ARGS = "BRIM_LOADER_ARGS"
ENV_FOOTPRINT = "BRIM_FOOTPRINT"
ENV_METRICS = "BRIM_METRICS"
ENV_LOSS = "BRIM_LOSS"

#: the values that switch off an on-by-default switch (BRIM_ATTACH, BRIM_LOSS, BRIM_METRICS); the
#: same words as src/job/environment.ts and sitecustomize.py (test/job/contract.test.ts)
OFF_WORDS: FrozenSet[str] = frozenset(("0", "false", "no", "off"))

_warned: Set[str] = set()


def warn_once(key: str, message: str) -> None:
    """Print one line 'brim: warning: ...' on stderr, once per key and process."""
    if key in _warned:
        return
    _warned.add(key)
    try:
        sys.stderr.write("brim: warning: %s\n" % message)
        sys.stderr.flush()
    except Exception:  # stderr closed: nothing we can do, and nothing worth crashing for
        pass


class KnobError(ValueError):
    """A knob value from BRIM_KNOBS cannot be used as the type of the job's default."""


def channel_path() -> Optional[str]:
    path = os.environ.get(ENV_CHANNEL, "")
    return path or None


def switched_on(name: str) -> bool:
    """An on-by-default switch: off only when set to one of OFF_WORDS (any case, spaces around)."""
    return os.environ.get(name, "1").strip().lower() not in OFF_WORDS


def attach_on() -> bool:
    """Under brim (BRIM_CHANNEL) and the attach not switched off (BRIM_ATTACH)."""
    return channel_path() is not None and switched_on(ENV_ATTACH)


def footprint_on() -> bool:
    """brim plan's measuring runs (BRIM_FOOTPRINT=1): record what a step holds."""
    return os.environ.get(ENV_FOOTPRINT, "").strip() == "1"


def code_knobs_text() -> Optional[str]:
    """The JSON list of literals in the job's code a trial changes (BRIM_CODE_KNOBS), or None."""
    return os.environ.get(ENV_CODE_KNOBS) or None


def loader_args_text() -> str:
    """The JSON list of DataLoader arguments a trial sets (BRIM_LOADER_ARGS), '[]' when unset."""
    return os.environ.get(ENV_LOADER_ARGS) or "[]"


def channel_token() -> Optional[str]:
    """The secret brim's channel admits this job's processes on (BRIM_CHANNEL_TOKEN), or None."""
    return os.environ.get(ENV_CHANNEL_TOKEN) or None


_int_cache: Dict[Tuple[str, str, int], Optional[int]] = {}


def _int_env(name: str, minimum: int = 0) -> Optional[int]:
    raw = os.environ.get(name, "")
    key = (name, raw, minimum)
    if key in _int_cache:  # read at every step: parse each value once
        return _int_cache[key]
    value = _parse_int_env(name, raw.strip(), minimum)
    _int_cache[key] = value
    return value


def _parse_int_env(name: str, raw: str, minimum: int) -> Optional[int]:
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        try:
            f = float(raw)
        except ValueError:
            f = math.nan
        if not (math.isfinite(f) and f.is_integer()):
            warn_once(name, "ignoring %s=%r: not an integer" % (name, raw))
            return None
        value = int(f)
    if value < minimum:
        warn_once(name, "ignoring %s=%r: below %d" % (name, raw, minimum))
        return None
    return value


def step_budget() -> Optional[int]:
    """Steps the trial may run (BRIM_STEP_BUDGET, a positive integer), or None."""
    return _int_env(ENV_STEP_BUDGET, minimum=1)


def seed() -> Optional[int]:
    """The seed of torch's generator in a trial (BRIM_SEED, 0 or more), or None: torch's own."""
    return _int_env(ENV_SEED, minimum=0)


def warmup_steps() -> int:
    """Steps reported as warm-up (BRIM_WARMUP_STEPS), 0 when unset."""
    return _int_env(ENV_WARMUP_STEPS, minimum=0) or 0


def memory_cap_bytes() -> Optional[int]:
    """The memory cap in bytes (BRIM_MEMORY_CAP_BYTES), or None."""
    return _int_env(ENV_MEMORY_CAP_BYTES, minimum=1)


def memory_cap_fraction() -> Optional[float]:
    """The memory cap as a fraction of the device (BRIM_MEMORY_CAP_FRACTION, 0 < f <= 1), or None."""
    raw = os.environ.get(ENV_MEMORY_CAP_FRACTION, "").strip()
    if not raw:
        return None
    try:
        f = float(raw)
    except ValueError:
        f = math.nan
    if not (0.0 < f <= 1.0):
        warn_once(ENV_MEMORY_CAP_FRACTION, "ignoring %s=%r: not in (0, 1]" % (ENV_MEMORY_CAP_FRACTION, raw))
        return None
    return f


def memory_cap_overhead_bytes() -> Optional[int]:
    return _int_env(ENV_MEMORY_CAP_OVERHEAD_BYTES, minimum=0)


def run_id() -> Optional[str]:
    return os.environ.get(ENV_RUN_ID) or None


def fault_oom_steps() -> FrozenSet[int]:
    """Step indices (0-based TrainStep calls) at which an out-of-memory error is injected."""
    raw = os.environ.get(ENV_FAULT_OOM_AT_STEP, "").strip()
    if not raw:
        return frozenset()
    steps: Set[int] = set()
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            steps.add(int(part))
        except ValueError:
            warn_once(ENV_FAULT_OOM_AT_STEP, "ignoring %s entry %r: not an integer" % (ENV_FAULT_OOM_AT_STEP, part))
    return frozenset(steps)


def fault_oom_phase() -> str:
    """Where the injected OOM is raised: 'forward' (default) or 'backward'."""
    raw = os.environ.get(ENV_FAULT_OOM_PHASE, "").strip().lower() or "forward"
    if raw not in ("forward", "backward"):
        warn_once(ENV_FAULT_OOM_PHASE, "ignoring %s=%r: use forward or backward" % (ENV_FAULT_OOM_PHASE, raw))
        return "forward"
    return raw


_knob_cache: Tuple[Optional[str], Dict[str, Any]] = (None, {})


_knob_file: List[Optional[Dict[str, Any]]] = [None]


def _knobs_from_file() -> Dict[str, Any]:
    """Knobs brim decided during the run (BRIM_KNOBS_FILE: a smaller micro-batch after a rank ran
    out of memory, for the launcher's next round). Read once per process: every rank of a round
    starts after brim wrote it, so all of them read the same values. {} while brim wrote none."""
    loaded = _knob_file[0]
    if loaded is None:
        path = os.environ.get(ENV_KNOBS_FILE, "")
        data: Any = {}
        if path:
            try:
                with open(path) as f:
                    data = json.load(f)
            except FileNotFoundError:
                data = {}
            except (OSError, ValueError) as e:
                warn_once("knobs-file", "could not read %s (%s); the knobs of BRIM_KNOBS hold" % (path, e))
                data = {}
        loaded = _knob_file[0] = data if isinstance(data, dict) else {}
    return loaded


def knobs() -> Dict[str, Any]:
    """All knobs of the current trial: the JSON object in BRIM_KNOBS ({} when unset), with the ones
    brim decided during the run (BRIM_KNOBS_FILE) over them."""
    global _knob_cache
    raw = os.environ.get(ENV_KNOBS, "")
    if raw == _knob_cache[0]:
        return dict(_knob_cache[1])
    if not raw.strip():
        parsed: Dict[str, Any] = {}
    else:
        try:
            parsed = json.loads(raw)
        except ValueError as e:
            raise KnobError("brim: %s is not valid JSON (%s): %r" % (ENV_KNOBS, e, raw[:200]))
        if not isinstance(parsed, dict):
            raise KnobError("brim: %s must be a JSON object, got %s" % (ENV_KNOBS, type(parsed).__name__))
    parsed = dict(parsed, **_knobs_from_file())
    _knob_cache = (raw, parsed)
    return dict(parsed)


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def cast_knob(name: str, value: Any, default: Any) -> Any:
    """Cast a knob value to the type of the default; raise KnobError when it cannot be done."""

    def fail() -> NoReturn:
        raise KnobError(
            "brim: knob %r = %r cannot be used as %s (the job's default is %r)"
            % (name, value, type(default).__name__, default)
        )

    if default is None:
        return value
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        fail()
    if isinstance(default, int):
        if isinstance(value, bool):
            fail()
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                try:
                    f = float(value)
                except ValueError:
                    fail()
                if math.isfinite(f) and f.is_integer():
                    return int(f)
        fail()
    if isinstance(default, float):
        if isinstance(value, bool):
            fail()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                fail()
        fail()
    if isinstance(default, str):
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        fail()
    if isinstance(default, (list, tuple)):
        if isinstance(value, list):
            return type(default)(value)
        fail()
    if isinstance(default, dict):
        if isinstance(value, dict):
            return value
        fail()
    return value


#: variables a launcher sets for each process (torchrun, SLURM, Lightning); brim reads them, never sets them
LAUNCHER_VARIABLES: Tuple[str, ...] = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
    "SLURM_NODEID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID",
)


def launcher_int(name: str) -> Optional[int]:
    """A launcher's whole-number variable (RANK, LOCAL_RANK, ...), None when unset or not a number."""
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else None
    except ValueError:
        return None


def rank() -> Optional[int]:
    """This process's global rank as the launcher set it (RANK), None when it set none."""
    return launcher_int("RANK")


def local_rank() -> Optional[int]:
    """This process's rank on its node (LOCAL_RANK), None when the launcher set none."""
    return launcher_int("LOCAL_RANK")


def group_rank() -> Optional[int]:
    """This process's node (GROUP_RANK, NODE_RANK or SLURM_NODEID, the first set), None for none."""
    return next((v for v in map(launcher_int, ("GROUP_RANK", "NODE_RANK", "SLURM_NODEID")) if v is not None), None)


def world_size() -> int:
    """Processes in the job as the launcher set it (WORLD_SIZE), 1 when unset: SLURM_NTASKS alone is
    not read as ranks, since an allocation of many tasks may run one process."""
    return launcher_int("WORLD_SIZE") or 1


def launch_id() -> Optional[str]:
    """What all the processes of one launch share (TORCHELASTIC_RUN_ID, else SLURM_JOB_ID), or None."""
    return os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("SLURM_JOB_ID") or None


def set_default(name: str, value: str) -> Optional[str]:
    """Set a variable for the libraries the job loads later (JAX's XLA_*) unless it is set; the value
    set, None when the job's own was kept."""
    if name in os.environ:
        return None
    os.environ[name] = value
    return value
