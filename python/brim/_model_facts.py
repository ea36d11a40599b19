"""What the model and its optimizer are, read once at the first optimizer step.

A tuned batch size can change more than the speed. brim names what changed from evidence, read
here once (never again in the job's hot path) and sent as one `model_facts` event:

- `lr`: each param group's learning rate as the first step uses it (a script that computes it from
  the batch size shows it moved between two trials);
- `batch_stat_layers`: the layers in training mode that normalise by the statistics of the batch
  they see (BatchNorm and its kin), by class, from the module tree that holds the optimizer's
  parameters: under a changed micro-batch they compute other numbers, even when micro-batch x
  accumulation is held;
- `models`: the class of each root module of that tree.
- `clip_grad_norm_calls`: the calls of `torch.nn.utils.clip_grad_norm_` before the first optimizer
  step (counted by a wrapper put on at torch's import): more than one is clipping per micro-batch,
  which changes the update when the accumulation changes.
- `token_loss` (only when seen): the tokens each micro-batch's loss is averaged over, from the
  model's input (_model_input.TokenInput: labels with the ignore index -100, or the attention
  mask), and whether the Hugging Face Trainer passed `num_items_in_batch` to the model's loss. A
  model given `labels` (Hugging Face's) averages its loss over the labels that are not -100 unless
  it is given `num_items_in_batch`; a mean over a number of tokens that varies from micro-batch to
  micro-batch is not the mean over the step's tokens: a changed accumulation changes the loss.

The tree is found by walking the live torch modules once (gc), keeping the roots whose parameters
the optimizer steps. A learning rate held as a tensor is read only on the CPU (reading one on a
device would wait for it).
"""

import gc
import math
import sys
from typing import Any, Dict, List, Optional

from . import _state
from ._model_input import token_input
from ._wrap import wrap_once

_done = [False]
_clips = [0]


def _wrap_clip(original: Any) -> Any:
    def clip_with_brim(*args: Any, **kwargs: Any) -> Any:
        _clips[0] += 1
        return original(*args, **kwargs)

    return clip_with_brim


def patch_clip(torch: Any) -> None:
    """Count gradient clipping by norm, by either name the job may call it by."""
    utils = torch.nn.utils
    wrap_once(utils, "clip_grad_norm_", _wrap_clip)
    clip_module = getattr(utils, "clip_grad", None)
    if clip_module is not None:
        wrap_once(clip_module, "clip_grad_norm_", _wrap_clip)


def first_step(optimizer: Any) -> None:
    """Called by the attach before each optimizer step: the first one reads and sends the facts."""
    if _done[0]:
        return
    _done[0] = True
    try:
        facts = read(optimizer)
    except Exception:
        return
    try:
        tokens = token_input.take()
    except Exception:
        tokens = None
    if tokens is not None:
        facts["token_loss"] = tokens
    _state.event("model_facts", message=_message(facts), **facts)


def read(optimizer: Any) -> Dict[str, Any]:
    """The facts of `optimizer` and the modules whose parameters it steps."""
    groups = list(getattr(optimizer, "param_groups", []) or [])
    params = {id(p) for group in groups for p in group.get("params", [])}
    roots = _roots(params)
    layers: Dict[str, int] = {}
    seen = set()
    for root in roots:
        for module in root.modules():
            if id(module) in seen:
                continue
            seen.add(id(module))
            if _batch_statistics(module):
                name = type(module).__name__
                layers[name] = layers.get(name, 0) + 1
    return {
        "lr": [_number(group.get("lr")) for group in groups],
        "batch_stat_layers": layers,
        "models": sorted({type(root).__name__ for root in roots}),
        "clip_grad_norm_calls": _clips[0],
    }


def _roots(params: set) -> List[Any]:
    torch = sys.modules.get("torch")
    if torch is None or not params:
        return []
    module_type = torch.nn.Module
    # type(o), not isinstance: isinstance reads o.__class__, which some objects answer with a warning
    modules = [o for o in gc.get_objects() if issubclass(type(o), module_type)]
    children = {id(child) for m in modules for child in getattr(m, "_modules", {}).values() if child is not None}
    roots = []
    for m in modules:
        if id(m) in children:
            continue
        try:
            if any(id(p) in params for p in m.parameters()):
                roots.append(m)
        except Exception:
            continue
    return roots


def _batch_statistics(module: Any) -> bool:
    """BatchNorm1d/2d/3d, SyncBatchNorm and the lazy ones, in training mode: statistics of the batch seen.
    InstanceNorm shares their base class but normalises each sample alone, so it does not count."""
    batchnorm = getattr(sys.modules.get("torch.nn.modules.batchnorm"), "_BatchNorm", None)
    return batchnorm is not None and isinstance(module, batchnorm) and bool(getattr(module, "training", False))


def _number(value: Any) -> Optional[float]:
    number: Optional[float] = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        try:
            if value.device.type == "cpu" and value.numel() == 1:
                number = float(value)
        except Exception:
            pass
    return number if number is not None and math.isfinite(number) else None


def _message(facts: Dict[str, Any]) -> str:
    layers = ", ".join("%s x%d" % item for item in sorted(facts["batch_stat_layers"].items())) or "none"
    text = "learning rate %s at the first step; batch-statistic layers: %s" % (facts["lr"], layers)
    tokens = facts.get("token_loss")
    if tokens is not None and tokens["varying"]:
        text += "; loss over %s tokens a row (%s)" % ("-".join(str(n) for n in tokens["row_tokens"]), tokens["source"])
    return text
