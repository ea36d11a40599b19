"""Environment steps of a reinforcement-learning job: the transitions its vectorised environments made.

When the job imports them, the attach wraps the concrete vector environments of Stable-Baselines3
(DummyVecEnv, SubprocVecEnv: `step_wait`) and Gymnasium (SyncVectorEnv: `step`, AsyncVectorEnv:
`step_wait`): each call adds the number of environments. The wrappers around them (VecNormalize,
VecMonitor, Gymnasium's vector wrappers) pass through to these, so a transition counts once. Each
step message carries the total so far (its extra field `env_steps`): environment steps/s beside the
samples/s of the updates.
"""

import sys
from typing import Any, Tuple

from ._import_hook import OnImport
from ._wrap import wrap_once

# (module, class, method that finishes one step of every environment)
TARGETS: Tuple[Tuple[str, str, str], ...] = (
    ("stable_baselines3.common.vec_env.dummy_vec_env", "DummyVecEnv", "step_wait"),
    ("stable_baselines3.common.vec_env.subproc_vec_env", "SubprocVecEnv", "step_wait"),
    ("gymnasium.vector.sync_vector_env", "SyncVectorEnv", "step"),
    ("gymnasium.vector.async_vector_env", "AsyncVectorEnv", "step_wait"),
)


class EnvSteps:
    """Transitions counted so far in this process."""

    def __init__(self) -> None:
        self.total = 0

    def add(self, env: Any) -> None:
        n = getattr(env, "num_envs", None)
        if isinstance(n, int) and n > 0:
            self.total += n


env_steps = EnvSteps()


def _wrap(original: Any) -> Any:
    def step_with_brim(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        env_steps.add(self)
        return out

    return step_with_brim


def _patcher(cls: str, method: str) -> Any:
    def patch(module: Any) -> None:
        try:
            owner = getattr(module, cls, None)
            if owner is not None:
                wrap_once(owner, method, _wrap)
        except Exception:
            pass  # the job's import goes on; its environment steps go uncounted

    return patch


def install() -> None:
    """Wrap each vector environment now if its module is imported, else when it is."""
    for name, cls, method in TARGETS:
        patch = _patcher(cls, method)
        module = sys.modules.get(name)
        if module is not None:
            patch(module)
        else:
            sys.meta_path.insert(0, OnImport(name, patch))
