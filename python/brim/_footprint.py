"""Footprint capture for `brim plan -- <command>`: what an unmodified job's training step holds.

Switched on only by BRIM_FOOTPRINT=1 (brim plan's measuring runs set it), right after the attach has
wrapped torch. It is a measuring instrument for a few steps, never used in a tuned or guarded run.

What it reports, as "footprint" events on brim's channel (one after each backward, the last wins):

- parameters of every nn.Module alive at the first backward (found once through the garbage
  collector, so a model the job built anywhere counts): total and trainable elements, by dtype,
  and their shapes;
- gradients (bytes of `.grad` after each backward) and optimizer state (bytes of the tensors in
  `optimizer.state` of every optimizer created), the largest seen;
- bytes autograd saved for backward during each forward, through a global
  `torch.autograd.graph.saved_tensors_hooks` whose hooks only count (they return the tensor
  unchanged): storages are counted once, parameters and the batch itself left out. On a CPU this
  is exact where an allocator or RSS delta is not: the CPU allocator returns memory to the system
  and glibc keeps arenas, so RSS follows neither the saved tensors nor their release;
- the batch the DataLoader gave: its tensors' bytes and samples;
- the shape of each convolution in the forward (channels, kernel, output positions): cuDNN's
  workspace for it follows the im2col matrix;
- for each call of an LSTM or GRU (nn.RNNBase) in the forward: its shape (layers, directions, input
  and hidden sizes, tokens) and the bytes first saved inside it. The CPU kernels save per-step gate
  tensors where cuDNN keeps one reserve space, so brim plan replaces these bytes with cuDNN's layout
  when it plans for a GPU (src/plan/script.ts).

The window of one forward opens at the DataLoader's fetch and closes at the backward.
"""

import gc
import warnings
from typing import Any, Dict, Iterable, List, Optional, Set

from . import _env, _state

_MAX_TENSORS = 4000
# layers whose GPU kernels (cuDNN) take workspaces a CPU run never shows
_CUDNN_KINDS = ("Conv", "LSTM", "GRU", "RNN", "ConvTranspose")


def wanted() -> bool:
    return _env.footprint_on()


def _storage(t: Any) -> Optional[tuple]:
    try:
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        nbytes = st.nbytes() if callable(getattr(st, "nbytes", None)) else st.size() * t.element_size()
        return st.data_ptr(), int(nbytes)
    except Exception:
        return None


def _weight_copy(t: Any) -> bool:
    """Is `t` (or the tensor it views: a Linear saves the copy transposed) a dtype copy of a
    parameter, autocast's cast of a weight?"""
    try:
        for x in (t, getattr(t, "_base", None)):
            fn = getattr(x, "grad_fn", None) if x is not None else None
            if fn is not None and type(fn).__name__.startswith("ToCopyBackward"):
                if any(f is not None and hasattr(f, "variable") for f, _ in fn.next_functions):
                    return True
        return False
    except Exception:
        return False


def _tensors(x: Any, out: List[Any], depth: int = 0) -> None:
    if depth > 4 or len(out) > 256:
        return
    if hasattr(x, "untyped_storage") or hasattr(x, "storage") and hasattr(x, "element_size"):
        out.append(x)
    elif isinstance(x, dict) or hasattr(x, "keys") and hasattr(x, "__getitem__"):
        try:
            for k in list(x.keys()):
                _tensors(x[k], out, depth + 1)
        except Exception:
            pass
    elif isinstance(x, (list, tuple)):
        for v in x:
            _tensors(v, out, depth + 1)


class RecurrentCalls:
    """The calls of nn.LSTM / nn.GRU / nn.RNN in one forward: each one's shape and the storages
    first saved inside it (given the keys saved so far at its start and end). Used by the attach's
    footprint and by brim.torch.profile: brim plan replaces what the CPU kernels saved inside the
    calls with cuDNN's layout (src/plan/cudnn.ts)."""

    def __init__(self) -> None:
        self.open: List[tuple] = []
        self.calls: List[tuple] = []

    def begin(self, mod: Any, inputs: Any, saved: Iterable[int]) -> None:
        x = inputs[0] if isinstance(inputs, tuple) and inputs else None
        s = _storage(getattr(x, "data", x)) if x is not None else None
        self.open.append((mod, set(saved), s[0] if s else None))

    def end(self, mod: Any, inputs: Any, output: Any, saved: Iterable[int]) -> None:
        at = [i for i, entry in enumerate(self.open) if entry[0] is mod]
        if not at:
            return
        _mod, before, input_ptr = self.open[at[-1]]
        del self.open[at[-1]:]  # and any call a raised forward left open
        x: Any = inputs[0] if isinstance(inputs, tuple) and inputs else None
        out = output[0] if isinstance(output, tuple) and output else output
        data: Any = getattr(out, "data", out)  # a PackedSequence's rows are its tokens
        if x is None or data is None or not hasattr(data, "element_size"):
            return
        if hasattr(x, "batch_sizes") and hasattr(x, "data"):
            tokens = int(x.data.shape[0])
        elif x.dim() == 3:
            tokens = int(x.shape[0]) * int(x.shape[1])
        else:
            tokens = int(x.shape[0])  # unbatched (L, H_in)
        o = _storage(data)
        shape = {
            "batch_first": bool(getattr(mod, "batch_first", False)),
            "mode": str(mod.mode), "input_size": int(mod.input_size), "hidden_size": int(mod.hidden_size),
            "layers": int(mod.num_layers), "bidirectional": bool(mod.bidirectional),
            "proj_size": int(getattr(mod, "proj_size", 0) or 0), "tokens": tokens,
            "elem_bytes": int(data.element_size()),
        }
        self.calls.append((shape, set(saved) - before, input_ptr, o[0] if o else None))

    def inside(self) -> Set[int]:
        """The storages first saved inside any call."""
        out: Set[int] = set()
        for call in self.calls:
            out |= call[1]
        return out

    def report(self, window: Dict[int, int], skip: Set[int]) -> List[Dict[str, Any]]:
        """Each call's shape, the bytes first saved inside it, and whether its input and output were saved."""
        out = []
        for shape, ptrs, input_ptr, output_ptr in self.calls:
            kept = [p for p in ptrs if p not in skip]
            # the output saved by a later layer (a head reading it) is the tensor cuDNN keeps too
            out.append(dict(shape, saved_bytes=sum(window.get(p, 0) for p in kept),
                            input_saved=input_ptr is not None and input_ptr in kept,
                            output_saved_after=output_ptr is not None and output_ptr in window and output_ptr not in ptrs))
        return out


class _Capture:
    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.window: Dict[int, int] = {}
        self.batch_ptrs: List[Set[int]] = []
        self.batch_bytes: Optional[int] = None
        self.batch_samples: Optional[int] = None
        self.param_ptrs: Set[int] = set()
        self.params: Optional[Dict[str, Any]] = None
        self.optimizers: List[Any] = []
        self.grad_bytes = 0
        self.state_bytes = 0
        self.forwards = 0
        self.depth = 0
        # autocast is entered around the forward and left before the backward: read it while saving
        self.forward_autocast: Optional[str] = None
        # storages that are a dtype copy of a parameter (autocast's cache): saved, but of fixed size
        self.copies: Set[int] = set()
        self.rnn = RecurrentCalls()
        # convolutions of this forward, one entry per distinct shape: cuDNN's workspace follows the im2col matrix
        self.convs: Set[tuple] = set()

    # -- hooks -------------------------------------------------------------------------------
    def pack(self, t: Any) -> Any:
        s = _storage(t)
        if s is not None and s[0]:
            self.window[s[0]] = max(s[1], self.window.get(s[0], 0))
            if _weight_copy(t):
                self.copies.add(s[0])
        if self.forward_autocast is None:
            self.forward_autocast = self._autocast()
        return t

    def fetched(self, batch: Any) -> None:
        tensors: List[Any] = []
        _tensors(batch, tensors)
        ptrs: Set[int] = set()
        total = 0
        samples = None
        for t in tensors:
            s = _storage(t)
            if s is None:
                continue
            if s[0] not in ptrs:
                total += s[1]
            ptrs.add(s[0])
            if samples is None and getattr(t, "dim", lambda: 0)() > 0:
                samples = int(t.shape[0])
        # Lightning fetches one batch ahead: the one in training is the one before the last
        self.batch_ptrs = (self.batch_ptrs + [ptrs])[-2:]
        self.batch_bytes = total
        self.batch_samples = samples
        self.window = {}
        self.copies = set()
        self.rnn.calls = []
        self.convs = set()

    def conv_end(self, mod: Any, output: Any) -> None:
        if getattr(mod, "transposed", False) or not hasattr(output, "shape") or len(self.convs) >= 256:
            return
        dims = len(mod.kernel_size)
        batched = output.dim() == dims + 2
        positions = 1
        for d in output.shape[-dims:]:
            positions *= int(d)
        kernel = 1
        for k in mod.kernel_size:
            kernel *= int(k)
        self.convs.add((dims, int(mod.in_channels) // int(mod.groups), kernel, positions,
                        int(output.shape[0]) if batched else 1, int(output.element_size())))

    def rnn_begin(self, mod: Any, inputs: Any) -> None:
        self.rnn.begin(mod, inputs, self.window)

    def rnn_end(self, mod: Any, inputs: Any, output: Any) -> None:
        self.rnn.end(mod, inputs, output, self.window)

    def backward_begin(self) -> tuple:
        if self.params is None:
            self.params = self._scan_params()
        skip = set(self.param_ptrs)
        for ptrs in self.batch_ptrs:
            skip |= ptrs
        kept = [(p, n) for p, n in self.window.items() if p not in skip]
        # the largest saved tensor stands for the backward's per-sample buffers: a weight copy is not one
        grows = [n for p, n in kept if p not in self.copies]
        recurrent = self.rnn.report(self.window, skip)
        inside = self.rnn.inside()
        outside = [n for p, n in kept if p not in self.copies and p not in inside]
        convs = [{"dims": c[0], "in_channels": c[1], "kernel": c[2], "positions": c[3], "batch": c[4], "elem_bytes": c[5]}
                 for c in sorted(self.convs)]
        self.window = {}
        self.copies = set()
        self.rnn.calls = []
        self.convs = set()
        return (sum(n for _, n in kept), max(grows) if grows else 0, recurrent, max(outside) if outside else 0, convs)

    def backward_end(self, saved: Optional[tuple]) -> None:
        self.forwards += 1
        grads = 0
        seen: Set[int] = set()
        for p in self._all_params():
            g = getattr(p, "grad", None)
            s = _storage(g) if g is not None else None
            if s is not None and s[0] not in seen:
                seen.add(s[0])
                grads += s[1]
        self.grad_bytes = max(self.grad_bytes, grads)
        self.state_bytes = max(self.state_bytes, self._state_bytes())
        details: Dict[str, Any] = {
            "forward": self.forwards,
            "saved_bytes": saved[0] if saved else None,
            "largest_saved_bytes": saved[1] if saved else None,
            "batch_bytes": self.batch_bytes,
            "batch_samples": self.batch_samples,
            "grad_bytes": self.grad_bytes,
            "optimizer_state_bytes": self.state_bytes,
            "optimizers": sorted({type(o).__name__ for o in self.optimizers}),
            "autocast": self.forward_autocast or self._autocast(),
        }
        if saved and saved[2]:
            details["recurrent"] = saved[2]
            details["largest_saved_outside_recurrent_bytes"] = saved[3]
        if saved and saved[4]:
            details["convolutions"] = saved[4]
        self.forward_autocast = None
        if self.forwards == 1 and self.params is not None:
            details["params"] = self.params
        _state.event("footprint", message="what one training step holds (brim plan)", **details)

    # -- reading the model -------------------------------------------------------------------
    def _autocast(self) -> Optional[str]:
        torch = self.torch
        try:
            if torch.is_autocast_enabled():
                return str(torch.get_autocast_gpu_dtype())
            if hasattr(torch, "is_autocast_cpu_enabled") and torch.is_autocast_cpu_enabled():
                return str(torch.get_autocast_cpu_dtype())
        except Exception:
            pass
        return None

    def _all_params(self) -> List[Any]:
        out: List[Any] = []
        for o in self.optimizers:
            for group in getattr(o, "param_groups", []):
                out.extend(group.get("params", []))
        return out

    def _state_bytes(self) -> int:
        total = 0
        seen: Set[int] = set()
        for o in self.optimizers:
            for state in list(getattr(o, "state", {}).values()):
                values = state.values() if isinstance(state, dict) else []
                for v in values:
                    s = _storage(v) if hasattr(v, "element_size") else None
                    if s is not None and s[0] not in seen and getattr(v, "dim", lambda: 0)() > 0:
                        seen.add(s[0])
                        total += s[1]
        return total

    def _scan_params(self) -> Dict[str, Any]:
        torch = self.torch
        module_type = torch.nn.Module
        params: Dict[int, Any] = {}
        buffers: Dict[int, int] = {}
        cudnn: Set[str] = set()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # isinstance on a deprecated module object warns
            objects = [o for o in gc.get_objects() if isinstance(o, module_type)]
        for obj in objects:
            try:
                kind = type(obj).__name__
                if type(obj).__module__.startswith("torch.nn") and kind.startswith(_CUDNN_KINDS):
                    cudnn.add(kind)
                for name, p in obj.named_parameters(recurse=False):
                    params.setdefault(id(p), (name, p))
                for b in obj.buffers(recurse=False):
                    s = _storage(b)
                    if s is not None:
                        buffers[s[0]] = s[1]
            except Exception:
                continue
        for p in self._all_params():
            params.setdefault(id(p), ("param", p))
        total = trainable = 0
        by_dtype: Dict[str, int] = {}
        shapes: List[Dict[str, Any]] = []
        for name, p in params.values():
            s = _storage(p)
            if s is not None:
                self.param_ptrs.add(s[0])
            n = int(p.numel())
            total += n
            if p.requires_grad:
                trainable += n
            key = str(p.dtype).replace("torch.", "")
            by_dtype[key] = by_dtype.get(key, 0) + n
            if len(shapes) < _MAX_TENSORS:
                shapes.append({"name": name, "shape": [int(d) for d in p.shape], "trainable": bool(p.requires_grad)})
        self.param_ptrs |= set(buffers)
        return {"total": total, "trainable": trainable, "by_dtype": by_dtype, "buffer_bytes": sum(buffers.values()),
                "tensors": shapes, "tensors_listed": len(shapes) == len(params), "cudnn_modules": sorted(cudnn)}


_capture: List[_Capture] = []


def install(torch: Any) -> None:
    """Start counting in this process (the main one: DataLoader workers run no backward)."""
    if _capture or not wanted():
        return
    cap = _Capture(torch)
    _capture.append(cap)

    hooks = torch.autograd.graph.saved_tensors_hooks(cap.pack, lambda t: t)
    hooks.__enter__()

    optimizer = torch.optim.Optimizer
    original_init = optimizer.__init__

    def init_with_footprint(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if all(o is not self for o in cap.optimizers):
            cap.optimizers.append(self)

    optimizer.__init__ = init_with_footprint

    iterator = torch.utils.data.dataloader._BaseDataLoaderIter
    original_next = iterator.__next__

    def next_with_footprint(self: Any) -> Any:
        batch = original_next(self)
        try:
            cap.fetched(batch)
        except Exception:
            pass
        return batch

    iterator.__next__ = next_with_footprint

    rnn_base = torch.nn.RNNBase
    conv_base = torch.nn.modules.conv._ConvNd
    module = torch.nn.modules.module
    if hasattr(module, "register_module_forward_pre_hook"):
        def rnn_pre(mod: Any, inputs: Any) -> None:
            if isinstance(mod, rnn_base) and not cap.depth:
                try:
                    cap.rnn_begin(mod, inputs)
                except Exception:
                    pass

        def rnn_post(mod: Any, inputs: Any, output: Any) -> None:
            if cap.depth:
                return
            try:
                if isinstance(mod, rnn_base):
                    cap.rnn_end(mod, inputs, output)
                elif isinstance(mod, conv_base):
                    cap.conv_end(mod, output)
            except Exception:
                pass

        module.register_module_forward_pre_hook(rnn_pre)
        module.register_module_forward_hook(rnn_post)

    autograd = torch.autograd
    original_backward = autograd.backward

    def backward_with_footprint(*args: Any, **kwargs: Any) -> Any:
        if cap.depth:
            return original_backward(*args, **kwargs)
        saved = None
        try:
            saved = cap.backward_begin()
        except Exception:
            pass
        cap.depth += 1
        try:
            out = original_backward(*args, **kwargs)
        finally:
            cap.depth -= 1
        try:
            cap.backward_end(saved)
        except Exception:
            pass
        return out

    autograd.backward = backward_with_footprint
