"""profile(): a model profile measured without a GPU (docs/schemas/model-profile.v1.json)."""

import collections.abc
import contextlib
import datetime
import json
import os
import tempfile
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple, Union

import torch

import brim

from .._footprint import RecurrentCalls
from ._step import _autocast_works
from ._util import batch_size, iter_tensors, storage_of

SCHEMA = "brim.model-profile"
VERSION = 1


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _resize_batch(batch: Any, n: int, b: int) -> Any:
    """A batch of b samples built from a batch of n (samples repeated when b > n), every tensor a
    fresh contiguous copy so that no measured storage is shared with the caller's batch."""
    index = torch.arange(b) % n

    def pick(x: Any) -> Any:
        if torch.is_tensor(x):
            if x.dim() > 0 and x.shape[0] == n:
                return x.index_select(0, index.to(x.device)).contiguous()
            return x.clone()
        if isinstance(x, dict):
            try:
                return type(x)((k, pick(v)) for k, v in x.items())
            except Exception:
                return {k: pick(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            is_container = any(torch.is_tensor(v) or isinstance(v, (list, tuple, dict)) for v in x)
            if not is_container and len(x) == n:
                items = [x[i] for i in index.tolist()]
            else:
                items = [pick(v) for v in x]
            if isinstance(x, tuple) and hasattr(x, "_fields"):
                return type(x)(*items)
            return type(x)(items)
        return x

    return pick(batch)


def _default_loss(model: Any, batch: Any) -> Any:
    if isinstance(batch, dict):
        out = model(**batch)
    elif isinstance(batch, (list, tuple)):
        out = model(*batch)
    else:
        out = model(batch)
    total = None
    if not torch.is_tensor(out) and isinstance(out, collections.abc.Mapping):
        out = list(out.values())  # e.g. a transformers ModelOutput
    for t in iter_tensors(out):
        if t.is_floating_point():
            s = t.float().sum()
            total = s if total is None else total + s
    return total


# ---- forward FLOPs -----------------------------------------------------------------------------
# Counted (multiply-add = 2 FLOPs), from forward hooks on these modules only:
#   Linear (and subclasses, e.g. LoRA adapters built from Linear), Bilinear,
#   Conv1d/2d/3d, ConvTranspose1d/2d/3d, RNN/LSTM/GRU (input and recurrent matmuls of every layer
#   and direction, LSTM projections), MultiheadAttention (q/k/v/out projections, QK^T and the
#   weighted sum of values).
# Not counted: matmuls written directly in a module's forward (torch.matmul, einsum, F.linear
# outside a Linear module, F.scaled_dot_product_attention), element-wise ops, norms, softmax,
# activations, embeddings (lookups), the loss.


def _prod(xs: Iterable[Any]) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def _module_flops(mod: Any, inputs: Tuple[Any, ...], output: Any) -> int:
    nn = torch.nn
    if isinstance(mod, nn.Linear):
        out = output if torch.is_tensor(output) else None
        if out is None:
            return 0
        rows = out.numel() // max(1, mod.out_features)
        return 2 * mod.in_features * mod.out_features * rows
    if isinstance(mod, nn.Bilinear):
        rows = output.numel() // max(1, mod.out_features)
        return 2 * mod.in1_features * mod.in2_features * mod.out_features * rows
    if isinstance(mod, nn.modules.conv._ConvNd):
        k = _prod(mod.kernel_size)
        if mod.transposed:
            x = inputs[0]
            return 2 * x.numel() * (mod.out_channels // mod.groups) * k
        return 2 * (mod.in_channels // mod.groups) * k * output.numel()
    if isinstance(mod, nn.RNNBase):
        x = inputs[0]
        if isinstance(x, nn.utils.rnn.PackedSequence):
            tokens = int(x.data.shape[0])
        else:
            tokens = x.numel() // max(1, x.shape[-1])
        gates = {"LSTM": 4, "GRU": 3}.get(mod.mode, 1)
        hidden = mod.hidden_size
        proj = getattr(mod, "proj_size", 0) or 0
        h_out = proj or hidden
        dirs = 2 if mod.bidirectional else 1
        per_token = 0
        for layer in range(mod.num_layers):
            in_l = mod.input_size if layer == 0 else h_out * dirs
            per_dir = 2 * gates * hidden * (in_l + h_out)
            if proj:
                per_dir += 2 * hidden * proj
            per_token += dirs * per_dir
        return tokens * per_token
    if isinstance(mod, nn.MultiheadAttention):
        if len(inputs) < 3 or not all(torch.is_tensor(t) for t in inputs[:3]):
            return 0
        q, k, _v = inputs[:3]
        e = mod.embed_dim
        if q.dim() == 2:  # unbatched (L, E)
            n, seq_q, seq_k = 1, q.shape[0], k.shape[0]
        elif mod.batch_first:
            n, seq_q, seq_k = q.shape[0], q.shape[1], k.shape[1]
        else:
            n, seq_q, seq_k = q.shape[1], q.shape[0], k.shape[0]
        per = (2 * seq_q * e * e + 2 * seq_k * mod.kdim * e + 2 * seq_k * mod.vdim * e
               + 2 * seq_q * seq_k * e + 2 * seq_q * seq_k * e + 2 * seq_q * e * e)
        return n * per
    return 0


# ---- measurement ----------------------------------------------------------------------------------


class _Measured(NamedTuple):
    """What one forward+loss saved for backward."""
    total: int
    largest: int
    flops: int
    # each nn.LSTM/GRU/RNN call: its shape and the bytes first saved inside it (RecurrentCalls.report)
    recurrent: List[Dict[str, Any]]
    # the largest storage saved outside those calls
    largest_outside: int


def _measure(model: Any, batch: Any, loss_fn: Callable[[Any, Any], Any], exclude_ptrs: Set[int], amp_dtype: Any,
             device_type: str, count_flops: bool) -> _Measured:
    """Saved-for-backward storages of one forward+loss, and its recurrent calls."""
    batch_ptrs: Set[int] = set()
    for t in iter_tensors(batch):
        try:
            batch_ptrs.add(storage_of(t)[0])
        except Exception:
            pass
    storages: Dict[int, int] = {}

    def pack(t: Any) -> Any:
        try:
            ptr, nbytes = storage_of(t)
        except Exception:
            return t
        if ptr and ptr not in exclude_ptrs and ptr not in batch_ptrs:
            storages[ptr] = max(nbytes, storages.get(ptr, 0))
        return t

    def unpack(t: Any) -> Any:
        return t

    flops = [0]
    handles: List[Any] = []
    if count_flops:
        def hook(mod: Any, inputs: Tuple[Any, ...], output: Any) -> None:
            flops[0] += _module_flops(mod, inputs, output)

        handles = [m.register_forward_hook(hook) for m in model.modules()]
    rnn = RecurrentCalls()
    for m in model.modules():
        if isinstance(m, torch.nn.RNNBase):
            handles.append(m.register_forward_pre_hook(lambda mod, inputs: rnn.begin(mod, inputs, storages)))
            handles.append(m.register_forward_hook(lambda mod, inputs, output: rnn.end(mod, inputs, output, storages)))
    try:
        amp = (torch.autocast(device_type=device_type, dtype=amp_dtype) if amp_dtype is not None
               else contextlib.nullcontext())
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, unpack), amp:
            loss = loss_fn(model, batch)
        total = sum(storages.values())
        largest = max(storages.values()) if storages else 0
        inside = rnn.inside()
        outside = [n for p, n in storages.items() if p not in inside]
        recurrent = rnn.report(storages, set())
        del loss  # the graph (and the storages it kept) goes only now: no address was reused
    finally:
        for h in handles:
            h.remove()
    return _Measured(total, largest, flops[0], recurrent, max(outside) if outside else 0)


def _recurrent_per_sample(m1: _Measured, m2: _Measured, b1: int, b2: int) -> Optional[Dict[str, Any]]:
    """The recurrent calls of the fp32 forward per sample: tokens and bytes saved inside each call as
    the slope between the two batch sizes; None when the model has no such call, or the two
    forwards did not make the same calls. brim plan counts them as cuDNN keeps them."""
    if not m2.recurrent or len(m1.recurrent) != len(m2.recurrent):
        return None
    calls = []
    for c1, c2 in zip(m1.recurrent, m2.recurrent):
        call = dict(c2)
        call["tokens"] = _num(max(0.0, (c2["tokens"] - c1["tokens"]) / float(b2 - b1)))
        call["saved_bytes"] = _num(max(0.0, (c2["saved_bytes"] - c1["saved_bytes"]) / float(b2 - b1)))
        calls.append(call)
    largest = max(0.0, (m2.largest_outside - m1.largest_outside) / float(b2 - b1))
    return {"calls": calls, "largest_saved_outside_bytes": _num(largest)}


class ProfileError(RuntimeError):
    """The model's forward and backward could not be measured; the message says why and what to do."""


_ONEDNN_SIGNS = ("primitive descriptor", "mkldnn", "onednn", "dnnl")


def _is_onednn_error(error: BaseException) -> bool:
    text = str(error).lower()
    return any(sign in text for sign in _ONEDNN_SIGNS)


def _measure_or_fallback(model: Any, batch: Any, loss_fn: Callable[[Any, Any], Any], exclude_ptrs: Set[int], amp_dtype: Any,
                         device_type: str, count_flops: bool, notes: List[str], prec: str) -> _Measured:
    """_measure, and when oneDNN (mkldnn) cannot build a primitive for an op on this CPU and
    PyTorch (LSTM/GRU under PyTorch 2.x: "could not create a primitive descriptor for the LSTM
    forward propagation primitive"), _measure again with oneDNN switched off: PyTorch's native CPU
    kernels keep the same tensors for backward."""
    try:
        return _measure(model, batch, loss_fn, exclude_ptrs, amp_dtype, device_type, count_flops)
    except RuntimeError as error:
        if device_type != "cpu" or not _is_onednn_error(error) or not hasattr(torch.backends, "mkldnn"):
            raise
        note = "%s: oneDNN failed (%s); measured with torch.backends.mkldnn disabled" % (prec, str(error).strip().splitlines()[0][:200])
        if note not in notes:
            notes.append(note)
        with torch.backends.mkldnn.flags(enabled=False):
            return _measure(model, batch, loss_fn, exclude_ptrs, amp_dtype, device_type, count_flops)


def _failed(model: Any, device: Any, prec: str, error: BaseException) -> ProfileError:
    kind = type(model).__name__
    first = (str(error).strip().splitlines() or [""])[0][:300]
    return ProfileError(
        "brim.torch.profile: the forward and backward of %s failed on %s in %s: %s: %s. "
        "What to do: check that loss_fn(model, batch) runs on this batch as in training; if the "
        "error comes from a CPU kernel (oneDNN/mkldnn), profile with precisions=('fp32',), on "
        "another PyTorch version, or on a GPU; or plan from a model spec instead "
        "(brim plan model.yaml, docs/model-spec.md)." % (kind, device, prec, type(error).__name__, first)
    )


def _num(x: float) -> Union[int, float]:
    """An int when the value is integral (exact measurements stay exact in the JSON)."""
    x = float(x)
    return int(round(x)) if abs(x - round(x)) < 1e-9 else x


def profile(model: Any, sample_batch: Any, loss_fn: Optional[Callable[[Any, Any], Any]] = None,
            path: Optional[Union[str, "os.PathLike[str]"]] = None, *, name: Optional[str] = None,
            batches: Optional[Sequence[int]] = None,
            precisions: Sequence[str] = ("fp32", "bf16-mixed", "fp16-mixed")) -> Dict[str, Any]:
    """Measure a model profile (docs/schemas/model-profile.v1.json) on the device the model is on
    (meant for CPU: no GPU needed) and write it to `path` when given. Returns the profile dict.

    loss_fn(model, batch) -> loss, as for TrainStep; default: the model's floating outputs summed.
    The sample batch (tensors, or tuples/lists/dicts of them, dim 0 = samples) is resized to two
    batch sizes (default n//2 and n, or 1 and 2 for n == 1); the bytes saved for backward at each
    are measured and the slope is reported per sample, the intercept as fixed. Parameters,
    buffers and the input batch itself are not counted as saved (inputs are in input_bytes).
    Precisions that autocast does not support on the device are left out. The model's mode,
    buffers (e.g. BatchNorm statistics) and the global RNG state are restored afterwards."""
    if loss_fn is None:
        loss_fn = _default_loss
    n = batch_size(sample_batch)
    if n is None or n < 1:
        raise ValueError("brim.torch.profile: the sample batch needs a tensor with a batch dimension")
    if batches is None:
        batches = (n // 2, n) if n >= 2 else (1, 2)
    b1, b2 = int(batches[0]), int(batches[1])
    if not (1 <= b1 < b2):
        raise ValueError("brim.torch.profile: batches must be two sizes 1 <= b1 < b2, got %r" % (batches,))

    params = list(model.parameters())
    first = params[0] if params else next(iter(iter_tensors(sample_batch)), None)
    device = first.device if first is not None else torch.device("cpu")

    # params: counts, dtypes, shapes
    by_dtype: Dict[str, int] = {}
    tensors: List[Dict[str, Any]] = []
    total = trainable = 0
    for pname, p in model.named_parameters():
        numel = p.numel()
        total += numel
        if p.requires_grad:
            trainable += numel
        key = _dtype_name(p.dtype)
        by_dtype[key] = by_dtype.get(key, 0) + numel
        tensors.append({"name": pname, "shape": [int(s) for s in p.shape], "dtype": key,
                        "trainable": bool(p.requires_grad)})
    buffer_bytes = sum(b.numel() * b.element_size() for b in model.buffers())

    exclude: Set[int] = set()
    for t in list(model.parameters()) + list(model.buffers()):
        try:
            exclude.add(storage_of(t)[0])
        except Exception:
            pass

    input_bytes = 0
    for t in iter_tensors(sample_batch):
        if t.dim() > 0 and t.shape[0] == n:
            input_bytes += t[0].numel() * t.element_size()

    wanted: List[Tuple[str, Any]] = []
    for prec in precisions:
        if prec == "fp32":
            wanted.append((prec, None))
        elif prec in ("bf16-mixed", "fp16-mixed"):
            dtype = torch.bfloat16 if prec == "bf16-mixed" else torch.float16
            if _autocast_works(device.type, dtype):
                wanted.append((prec, dtype))
        else:
            raise ValueError("brim.torch.profile: unknown precision %r" % (prec,))
    if "fp32" not in [w[0] for w in wanted]:
        wanted.insert(0, ("fp32", None))

    small = _resize_batch(sample_batch, n, b1)
    large = _resize_batch(sample_batch, n, b2)
    was_training = model.training
    saved_buffers = [(b, b.detach().clone()) for b in model.buffers()]
    rng_devices = [device.index or 0] if device.type == "cuda" else []
    per_sample_saved: Dict[str, Union[int, float]] = {}
    fixed_saved: Dict[str, Union[int, float]] = {}
    largest_per_sample = 0.0
    flops_per_sample = 0.0
    recurrent: Optional[Dict[str, Any]] = None
    notes: List[str] = []
    try:
        model.train()
        with torch.random.fork_rng(devices=rng_devices):
            for prec, dtype in wanted:
                try:
                    m1 = _measure_or_fallback(model, small, loss_fn, exclude, dtype, device.type, False, notes, prec)
                    m2 = _measure_or_fallback(model, large, loss_fn, exclude, dtype, device.type, prec == "fp32", notes, prec)
                except (RuntimeError, NotImplementedError) as error:
                    if prec == "fp32":
                        raise _failed(model, device, prec, error) from error
                    # a 16-bit autocast path this CPU build lacks: brim plans that precision from fp32's
                    notes.append("%s: not measured (%s: %s)" % (prec, type(error).__name__, (str(error).strip().splitlines() or [""])[0][:200]))
                    continue
                slope = (m2.total - m1.total) / float(b2 - b1)
                per_sample_saved[prec] = _num(max(0.0, slope))
                fixed_saved[prec] = _num(m1.total - slope * b1)
                if prec == "fp32":
                    largest_per_sample = m2.largest / float(b2)
                    flops_per_sample = m2.flops / float(b2)
                    recurrent = _recurrent_per_sample(m1, m2, b1, b2)
    finally:
        with torch.no_grad():
            for b, copy in saved_buffers:
                b.copy_(copy)
        model.train(was_training)

    result: Dict[str, Any] = {
        "schema": SCHEMA,
        "version": VERSION,
        "name": name or type(model).__name__,
        "framework": {"name": "torch", "version": str(torch.__version__)},
        "params": {
            "total": int(total),
            "trainable": int(trainable),
            "by_dtype": by_dtype,
            "buffer_bytes": int(buffer_bytes),
            "tensors": tensors,
        },
        "per_sample": {
            "input_bytes": int(input_bytes),
            "saved_bytes": per_sample_saved,
            "largest_saved_bytes": _num(largest_per_sample),
            "forward_flops": _num(flops_per_sample),
            **({"recurrent": recurrent} if recurrent else {}),
        },
        "fixed": {"saved_bytes": fixed_saved},
        "measured": {
            "batches": [b1, b2],
            "device": str(device),
            "created": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
        },
    }
    if notes:
        result["measured"]["notes"] = notes
    if path is not None:
        _write_json(path, result)
    brim.send({"type": "profile", "profile": result, "path": os.path.abspath(path) if path else None})
    return result


def _write_json(path: Union[str, "os.PathLike[str]"], obj: Any) -> None:
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".brim-profile-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

