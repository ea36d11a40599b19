"""TrainStep: one training step with accumulation, mixed precision and out-of-memory recovery."""

import contextlib
import gc
import warnings
from typing import Any, Callable, ContextManager, Dict, List, Optional, Set, Tuple, cast

import torch

import brim
from brim import _env, _state, _tracking

from ._setup import configure
from ._util import batch_size, is_oom_error, make_oom_error, split_batch, to_device

PRECISIONS = ("fp32", "tf32", "bf16-mixed", "fp16-mixed")


class OOMFatalError(RuntimeError):
    """A training step does not fit in memory even at micro-batch 1 (or cannot be split)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return ("%s: %s" % (type(exc).__name__, text[0] if text else ""))[:400]


def _autocast_works(device_type: str, dtype: Any) -> bool:
    """Does autocast on this device produce `dtype` for a matmul? (CPU autocast in torch 1.13
    supports bf16 only and silently disables itself for fp16; old GPUs lack bf16.)"""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autocast(device_type=device_type, dtype=dtype):
                a = torch.ones(2, 2, device=device_type)
                return torch.mm(a, a).dtype == dtype
    except Exception:
        return False


def _make_scaler(device_type: str) -> Any:
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):  # torch >= 2.3
        try:
            return amp.GradScaler(device_type)
        except Exception:
            pass
    if device_type == "cuda":
        return torch.cuda.amp.GradScaler()
    return None  # CPU fp16 without a scaler (torch 2.0-2.2): non-finite losses still fall back


class TrainStep:
    """One call = forward + backward of one micro-batch (the loader's batch); the optimizer steps
    (then zero_grad(set_to_none=True)) every `accumulation` calls.

    loss_fn(model, batch) returns a scalar loss, the mean over the batch's samples.
    precision: fp32 | tf32 | bf16-mixed | fp16-mixed (a gradient scaler for fp16).

    On the framework's out-of-memory error inside forward/backward the failed attempt's gradients
    and graph are dropped, memory is freed, the batch is split into twice as many chunks (each
    chunk's loss weighted by chunk_size / batch_size, so the summed gradient equals the unsplit
    one) and the same step is retried; the split stays for later steps. A batch that does not fit
    at one sample per chunk raises OOMFatalError. Gradients accumulated by earlier micro-batches
    of the window are set aside during the call and added back after it succeeds, so a retry
    never counts a partial backward twice (cost: while a window is open, the new micro-batch's
    gradients live beside the accumulated ones until they are summed).

    grow_back: after this many successful calls at a split, try half the split again (0/None:
    never; default: knob "grow_back", else never). Each grow-back that OOMs doubles the wait.
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor], precision: str = "fp32", accumulation: int = 1,
                 device: Any = None, *, recover_oom: bool = True, grow_back: Optional[int] = None,
                 clip_grad_norm: Optional[float] = None, nonfinite_patience: int = 3) -> None:
        if precision not in PRECISIONS:
            raise ValueError("brim: precision must be one of %s, got %r" % (", ".join(PRECISIONS), precision))
        accumulation = int(accumulation)
        if accumulation < 1:
            raise ValueError("brim: accumulation must be >= 1, got %r" % accumulation)
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.accumulation = accumulation
        if device is None:
            p = next(iter(model.parameters()), None)
            device = p.device if p is not None else torch.device("cpu")
        self.device = torch.device(device)
        self.recover_oom = bool(recover_oom)
        if grow_back is None:
            grow_back = brim.knob("grow_back", 0)
        self.grow_back = int(grow_back or 0)
        self._grow_wait = self.grow_back
        self.clip_grad_norm = clip_grad_norm
        self.nonfinite_patience = max(1, int(nonfinite_patience))

        self.split = 1  # chunks per call, doubled on each OOM
        self.calls = 0  # index of the next call (0-based); BRIM_FAULT_OOM_AT_STEP uses it
        self.optimizer_steps = 0
        self.window = 0  # micro-batches accumulated since the last optimizer step
        self.stepped = False  # did the last call step the optimizer?
        self.oom_recoveries = 0
        self.nonfinite_in_a_row = 0
        self._ok_at_split = 0
        self._grew_at_call: Optional[int] = None
        self._fault_steps = _env.fault_oom_steps()
        self._fault_phase = _env.fault_oom_phase()

        self.requested_precision = precision
        self.precision = precision
        self._amp_dtype: Any = None
        self.scaler: Any = None
        self._setup_precision(precision)

    # -- precision ----------------------------------------------------------------------------
    def _setup_precision(self, precision: str) -> None:
        dev_type = self.device.type
        if precision == "tf32":
            configure(tf32=True)
        if precision in ("bf16-mixed", "fp16-mixed"):
            want = torch.bfloat16 if precision == "bf16-mixed" else torch.float16
            if _autocast_works(dev_type, want):
                self._amp_dtype = want
            else:
                fallback = "fp32"
                if want is torch.bfloat16 and dev_type == "cuda" and _autocast_works(dev_type, torch.float16):
                    fallback = "fp16-mixed"
                    self._amp_dtype = torch.float16
                reason = "autocast on %s does not support %s in torch %s" % (dev_type, precision, torch.__version__)
                _env.warn_once("precision-" + precision, "%s; using %s" % (reason, fallback))
                brim.event("precision_fallback", message=reason, step=self.calls,
                           **{"from": precision, "to": fallback, "reason": "unsupported"})
                precision = fallback
        self.precision = precision
        if precision == "fp16-mixed":
            self.scaler = _make_scaler(dev_type)

    def _autocast(self) -> ContextManager[Any]:
        if self._amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self._amp_dtype)

    def _fall_back_to_fp32(self, params: List[Any], step: int) -> None:
        old = self.precision
        if self.scaler is not None:
            # gradients of the open window were scaled; unscale them (the scale is a power of 2)
            scale = float(self.scaler.get_scale())
            for p in params:
                if p.grad is not None:
                    p.grad.div_(scale)
        self.precision = "fp32"
        self._amp_dtype = None
        self.scaler = None
        msg = "loss was not finite %d steps in a row under %s; continuing in fp32" % (self.nonfinite_in_a_row, old)
        _env.warn_once("precision-fallback", msg)
        brim.event("precision_fallback", message=msg, step=step,
                   **{"from": old, "to": "fp32", "reason": "nonfinite_loss", "count": self.nonfinite_in_a_row})
        self.nonfinite_in_a_row = 0

    # -- gradients ----------------------------------------------------------------------------
    def _params(self) -> List[Any]:
        seen: Set[int] = set()
        out: List[Any] = []
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)
        for p in self.model.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                out.append(p)
        return out

    @staticmethod
    def _set_aside(params: List[Any]) -> Optional[List[Any]]:
        saved = [p.grad for p in params]
        if all(g is None for g in saved):
            return None
        for p in params:
            p.grad = None
        return saved

    @staticmethod
    def _put_back(params: List[Any], saved: Optional[List[Any]], keep_new: bool) -> None:
        for i, p in enumerate(params):
            old = saved[i] if saved is not None else None
            new = p.grad if keep_new else None
            if old is None:
                p.grad = new
            elif new is None:
                p.grad = old
            else:
                old.add_(new)  # same sum as autograd's in-place accumulation: old + new
                p.grad = old

    # -- one attempt ----------------------------------------------------------------------------
    def _attempt(self, chunks: List[Tuple[Any, Any]], n: Optional[int], params: List[Any], inject: bool) -> Any:
        total = None
        for i, (chunk, size) in enumerate(chunks):
            handles: List[Any] = []
            try:
                with self._autocast():
                    loss = self.loss_fn(self.model, chunk)
                if inject and i == 0 and self._fault_phase == "forward":
                    raise make_oom_error("BRIM_FAULT_OOM_AT_STEP, step %d, forward" % self.calls)
                weight = (float(size) / float(n) if n else 1.0) / self.accumulation
                scaled = loss * weight if weight != 1.0 else loss
                if self.scaler is not None:
                    scaled = self.scaler.scale(scaled)
                if inject and i == 0 and self._fault_phase == "backward":
                    handles = _inject_in_backward(params, "BRIM_FAULT_OOM_AT_STEP, step %d, backward" % self.calls)
                scaled.backward()
            finally:
                for h in handles:
                    h.remove()
            part = loss.detach().float() * (float(size) / float(n) if n else 1.0)
            total = part if total is None else total + part
            del loss, scaled
        return total

    def _free(self, params: List[Any]) -> None:
        for p in params:
            p.grad = None
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    # -- the step -------------------------------------------------------------------------------
    def __call__(self, batch: Any) -> Optional[torch.Tensor]:
        idx = self.calls
        self.calls += 1
        self.stepped = False
        params = self._params()

        if brim.active() and _state.take_shrink_requests():
            self._shrink_on_request(batch, idx)

        batch = to_device(batch, self.device)
        n = batch_size(batch)
        inject = idx in self._fault_steps
        saved = self._set_aside(params)
        transitions: List[Dict[str, Any]] = []
        while True:
            # a size is None only when n is, and is then unused
            chunks: List[Tuple[Any, Any]] = split_batch(batch, n, self.split) if n else [(batch, None)]
            largest = max(size for _, size in chunks) if n else None
            failure = None
            try:
                total = self._attempt(chunks, n, params, inject)
            except Exception as e:
                if not (self.recover_oom and is_oom_error(e)):
                    self._put_back(params, saved, keep_new=False)
                    raise
                failure = _first_line(e)
                if largest is None or largest <= 1:
                    self._put_back(params, saved, keep_new=False)
                    self._free([])
                    why = ("the batch cannot be split (no tensor with a batch dimension)" if largest is None
                           else "even one sample per micro-batch does not fit")
                    msg = ("brim: out of memory at step %d: %s (batch of %s samples in %d chunks); "
                           "lower the batch size or the model size, or raise the memory cap. Last error: %s"
                           % (idx, why, n, len(chunks), failure))
                    brim.event("oom_fatal", message=msg, step=idx, batch=n, split=self.split,
                               micro_batch=largest, error=failure)
                    raise OOMFatalError(msg) from e
            if failure is None:
                break
            # out of memory: drop what the failed attempt held, split twice as fine, retry
            inject = False
            self._free(params)
            old = self.split
            rows = cast(int, n)  # largest > 1: the batch has n samples
            self.split = min(self.split * 2, rows)
            transitions.append({"split_from": old, "split_to": self.split, "micro_batch_from": largest,
                                "micro_batch_to": -(-rows // self.split), "error": failure})
            if self._grew_at_call is not None and idx - self._grew_at_call <= 1:
                self._grow_wait *= 2  # the grow-back did not hold: wait longer next time
            self._ok_at_split = 0

        micro = -(-n // self.split) if n else None
        if transitions:
            self.oom_recoveries += 1
            brim.event("oom_recovered", step=idx,
                       message="out of memory at step %d; retried as %d chunks of <= %d samples"
                       % (idx, self.split, cast(int, micro)),
                       batch=n, split=self.split, micro_batch=micro,
                       accumulation=self.accumulation * self.split, transitions=transitions)

        # non-finite losses under mixed precision: drop this micro-batch's gradients, fall back later
        if self._amp_dtype is not None and not bool(torch.isfinite(total).all()):
            self._put_back(params, saved, keep_new=False)
            self.nonfinite_in_a_row += 1
            brim.event("nonfinite_loss", step=idx, precision=self.precision, count=self.nonfinite_in_a_row)
            if self.nonfinite_in_a_row >= self.nonfinite_patience:
                self._fall_back_to_fp32(params, idx)
        else:
            if self._amp_dtype is not None:
                self.nonfinite_in_a_row = 0
            self._put_back(params, saved, keep_new=True)

        self.window += 1
        if self.window >= self.accumulation:
            self._optimizer_step(params, idx)
            self.window = 0
            self.stepped = True

        self._maybe_grow_back(idx)
        _tracking.note(micro_batch=micro, accumulation=self.accumulation * (self.split if n else 1), loss=total)
        return total

    def _optimizer_step(self, params: List[Any], idx: int) -> None:
        try:
            if self.clip_grad_norm:
                if self.scaler is not None:
                    self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], self.clip_grad_norm)
            if self.scaler is not None:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
        except Exception as e:
            if is_oom_error(e):
                msg = ("brim: out of memory in optimizer.step() at step %d (optimizer state does not fit; "
                       "splitting the batch cannot help): %s" % (idx, _first_line(e)))
                brim.event("oom_fatal", message=msg, step=idx, phase="optimizer", error=_first_line(e))
                raise OOMFatalError(msg) from e
            raise
        self.optimizer.zero_grad(set_to_none=True)
        self.optimizer_steps += 1

    def _maybe_grow_back(self, idx: int) -> None:
        if self.split <= 1 or not self.grow_back:
            return
        self._ok_at_split += 1
        if self._ok_at_split >= self._grow_wait:
            old = self.split
            self.split = max(1, self.split // 2)
            self._ok_at_split = 0
            self._grew_at_call = idx + 1
            brim.event("grow_back", step=idx, split_from=old, split_to=self.split)

    def _shrink_on_request(self, batch: Any, idx: int) -> None:
        n = batch_size(batch)
        old = self.split
        if n and self.split < n:
            self.split = min(self.split * 2, n)
        if self.device.type == "cuda":
            gc.collect()
            torch.cuda.empty_cache()
        brim.event("shrink_applied", step=idx, split_from=old, split_to=self.split,
                   micro_batch=-(-n // self.split) if n else None)

    def state_dict(self) -> Dict[str, Any]:
        """What the step learned (split, precision, scaler); save it with the checkpoint."""
        return {"split": self.split, "precision": self.precision, "calls": self.calls,
                "optimizer_steps": self.optimizer_steps, "window": self.window,
                "scaler": self.scaler.state_dict() if self.scaler is not None else None}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.split = int(state.get("split", 1))
        self.calls = int(state.get("calls", 0))
        self.optimizer_steps = int(state.get("optimizer_steps", 0))
        self.window = int(state.get("window", 0))
        if state.get("precision") == "fp32" and self.precision != "fp32":
            self.precision, self._amp_dtype, self.scaler = "fp32", None, None
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])


def _inject_in_backward(params: List[Any], detail: str) -> List[Any]:
    """Raise the real OOM type from inside backward, after at least one parameter's gradient has
    already been accumulated (the hard case for a retry)."""
    trainable = [p for p in params if p.requires_grad]
    count = [0]
    threshold = 2 if len(trainable) >= 2 else 1

    def hook(grad: Any) -> None:
        count[0] += 1
        if count[0] >= threshold:
            raise make_oom_error(detail)
        return None

    return [p.register_hook(hook) for p in trainable]
