"""TrainStep: out-of-memory recovery keeps the maths (parameters equal a run without the fault),
mixed precision, fallbacks."""

import collections

import pytest

torch = pytest.importorskip("torch")

import brim  # noqa: E402
import brim.torch as bt  # noqa: E402
from brim import _tracking  # noqa: E402
import schema_check  # noqa: E402

N_STEPS = 6
BATCH = 8


def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)
    )


def make_batches(n=N_STEPS, b=BATCH, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(b, 6, generator=g), torch.randn(b, 3, generator=g)) for _ in range(n)]


def mse(model, batch):
    x, y = batch
    return torch.nn.functional.mse_loss(model(x), y)


OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01),
}


def train(opt_name, accumulation=1, loss_fn=mse, batches=None, **kw):
    model = make_model()
    opt = OPTIMIZERS[opt_name](model.parameters())
    step = bt.TrainStep(model, opt, loss_fn, accumulation=accumulation, **kw)
    losses = [float(step(b)) for b in (batches or make_batches())]
    return model, step, losses


def assert_same_params(a, b):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), "%s differs by %g" % (name, (p - q).abs().max())


def test_oom_type_is_the_frameworks():
    err = bt.make_oom_error("x")
    assert isinstance(err, RuntimeError) and bt.is_oom_error(err)
    if hasattr(torch.cuda, "OutOfMemoryError"):
        assert type(err) is torch.cuda.OutOfMemoryError
    assert bt.is_oom_error(RuntimeError("CUDA out of memory. Tried to allocate 2.00 MiB"))
    assert not bt.is_oom_error(RuntimeError("shape mismatch"))
    assert not bt.is_oom_error(ValueError("out of memory"))


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
@pytest.mark.parametrize("accumulation", [1, 2])
@pytest.mark.parametrize("phase", ["forward", "backward"])
def test_injected_oom_keeps_the_maths(monkeypatch, opt_name, accumulation, phase):
    ref_model, ref_step, ref_losses = train(opt_name, accumulation)
    assert ref_step.split == 1 and ref_step.oom_recoveries == 0

    # step 1 is the second micro-batch of a window when accumulation == 2 (the hard case: the
    # window's gradients exist and a partial backward must not be counted twice)
    monkeypatch.setenv("BRIM_FAULT_OOM_AT_STEP", "1,3")
    monkeypatch.setenv("BRIM_FAULT_OOM_PHASE", phase)
    model, step, losses = train(opt_name, accumulation)
    assert step.oom_recoveries == 2
    assert step.split == 4  # doubled twice: the batch of 8 now runs as 4 chunks of 2
    assert step.optimizer_steps == ref_step.optimizer_steps == N_STEPS // accumulation
    assert losses == pytest.approx(ref_losses, rel=1e-5, abs=1e-6)
    assert_same_params(model, ref_model)
    assert all(p.grad is None for p in model.parameters())  # zero_grad(set_to_none=True)


def test_backward_injection_really_leaves_partial_gradients(monkeypatch):
    """Guard for the test above: the injected error fires after a gradient was accumulated, so a
    naive retry (without setting gradients aside) would give different parameters."""
    from brim.torch import _step

    model = make_model()
    params = list(model.parameters())
    handles = _step._inject_in_backward(params, "probe")
    x, y = make_batches(1)[0]
    with pytest.raises(torch.cuda.OutOfMemoryError if hasattr(torch.cuda, "OutOfMemoryError") else RuntimeError):
        mse(model, (x, y)).backward()
    for h in handles:
        h.remove()
    got = [p.grad is not None for p in params]
    assert any(got) and not all(got)


def test_real_cpu_allocator_oom_is_recovered():
    """No injection: the loss function asks the CPU allocator for an impossible amount of memory
    whenever a chunk has more than 2 samples, as a model too big for the device would."""

    def hungry(model, batch):
        x, y = batch
        if x.shape[0] > 2:
            torch.empty(x.shape[0] * (1 << 45), dtype=torch.uint8)  # ~ 100+ TiB: the allocator refuses
        return mse(model, batch)

    ref_model, _, ref_losses = train("adam")
    model, step, losses = train("adam", loss_fn=hungry)
    assert step.split == 4 and step.oom_recoveries == 1  # 8 -> 4 -> 2 on the first step, then kept
    assert losses == pytest.approx(ref_losses, rel=1e-5, abs=1e-6)
    assert_same_params(model, ref_model)


def test_uneven_split_and_dict_batches(monkeypatch):
    def dict_loss(model, batch):
        return mse(model, (batch["x"], batch["y"]))

    batches = [{"x": x[:7], "y": y[:7], "names": ["s%d" % i for i in range(7)]} for x, y in make_batches()]
    ref_model, _, _ = train("sgd", loss_fn=dict_loss, batches=batches)
    monkeypatch.setenv("BRIM_FAULT_OOM_AT_STEP", "0")
    model, step, _ = train("sgd", loss_fn=dict_loss, batches=batches)
    assert step.split == 2  # 7 samples -> chunks of 4 and 3, weighted 4/7 and 3/7
    assert_same_params(model, ref_model)


def test_split_batch_structures():
    Pair = collections.namedtuple("Pair", "x y")
    batch = {"a": torch.arange(10).view(5, 2), "b": Pair(torch.arange(5), ["p", "q", "r", "s", "t"]),
             "shared": torch.ones(3), "cfg": "keep"}
    parts = bt.split_batch(batch, 5, 2)
    assert [n for _, n in parts] == [3, 2]
    first, second = parts[0][0], parts[1][0]
    assert first["a"].tolist() == [[0, 1], [2, 3], [4, 5]] and second["a"].tolist() == [[6, 7], [8, 9]]
    assert isinstance(first["b"], Pair) and first["b"].y == ["p", "q", "r"] and second["b"].x.tolist() == [3, 4]
    assert first["shared"] is batch["shared"] and first["cfg"] == "keep"
    assert bt.batch_size(batch) == 5
    assert [n for _, n in bt.split_batch(torch.zeros(3, 1), 3, 8)] == [1, 1, 1]


def test_fatal_when_one_sample_does_not_fit(monkeypatch, server, channel_schema):
    monkeypatch.setenv("BRIM_FAULT_OOM_AT_STEP", "0")
    model = make_model()
    before = [p.detach().clone() for p in model.parameters()]
    step = bt.TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), mse)
    x, y = make_batches(1)[0]
    with pytest.raises(bt.OOMFatalError, match="even one sample per micro-batch does not fit") as info:
        step((x[:1], y[:1]))
    assert bt.is_oom_error(info.value.__cause__)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))
    assert all(p.grad is None for p in model.parameters())
    server.wait_for(lambda: any(m.get("kind") == "oom_fatal" for m in server.messages("event")))
    fatal = [m for m in server.messages("event") if m["kind"] == "oom_fatal"][0]
    schema_check.check(fatal, channel_schema)
    assert fatal["step"] == 0 and fatal["details"]["micro_batch"] == 1


def test_other_errors_propagate_and_keep_the_window(monkeypatch):
    calls = {"n": 0}

    def flaky(model, batch):
        calls["n"] += 1
        loss = mse(model, batch)
        if calls["n"] == 2:
            loss.backward()  # a partial gradient, then an unrelated error
            raise ValueError("bad batch")
        return loss

    model = make_model()
    step = bt.TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), flaky, accumulation=2)
    b = make_batches(2)
    step(b[0])
    grads = [p.grad.clone() for p in model.parameters()]
    with pytest.raises(ValueError, match="bad batch"):
        step(b[1])
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), grads))


def test_events_and_step_fields_over_the_channel(monkeypatch, server, channel_schema):
    monkeypatch.setenv("BRIM_FAULT_OOM_AT_STEP", "2")
    model = make_model()
    step = bt.TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), mse, accumulation=2)
    for batch in brim.track(make_batches()):
        step(batch)
    server.wait_for(lambda: len(server.messages("step")) == N_STEPS)
    for m in server.messages():
        schema_check.check(m, channel_schema)
    steps = server.messages("step")
    assert [(s["micro_batch"], s["accumulation"]) for s in steps] == [(8, 2)] * 2 + [(4, 4)] * 4
    assert all(isinstance(s["loss"], float) for s in steps)
    rec = [m for m in server.messages("event") if m["kind"] == "oom_recovered"]
    assert len(rec) == 1 and rec[0]["step"] == 2
    d = rec[0]["details"]
    assert d["batch"] == 8 and d["split"] == 2 and d["micro_batch"] == 4 and d["accumulation"] == 4
    assert d["transitions"][0]["split_from"] == 1 and "out of memory" in d["transitions"][0]["error"]


def test_grow_back_when_asked(monkeypatch, server):
    monkeypatch.setenv("BRIM_FAULT_OOM_AT_STEP", "0")
    ref_model, _, _ = train("sgd")
    model, step, _ = train("sgd", grow_back=2)
    assert step.split == 1  # split at step 0, two good steps, back to 1, and so on
    assert_same_params(model, ref_model)
    server.wait_for(lambda: any(m.get("kind") == "grow_back" for m in server.messages("event")))


def test_grow_back_off_by_default(monkeypatch):
    monkeypatch.setenv("BRIM_FAULT_OOM_AT_STEP", "0")
    _, step, _ = train("sgd")
    assert step.split == 2


def test_shrink_request_from_brim(server):
    def on_message(conn, msg):
        if msg["type"] == "step" and msg["step"] == 1:
            conn.send({"v": 1, "type": "shrink", "reason": "near the cap"})

    server.on_message = on_message
    ref_model, _, _ = train("sgd")
    model = make_model()
    step = bt.TrainStep(model, OPTIMIZERS["sgd"](model.parameters()), mse)
    for i, batch in enumerate(brim.track(make_batches())):
        if i == 3:
            _tracking.flush(force=True)  # steps go out in batches; a real loop sends them within 50 ms
            server.wait_for(lambda: len(server.messages("step")) >= 2)
            import time

            time.sleep(0.05)
        step(batch)
    assert step.split == 2
    assert_same_params(model, ref_model)
    server.wait_for(lambda: any(m.get("kind") == "shrink_applied" for m in server.messages("event")))


def test_bf16_mixed_on_cpu_uses_autocast():
    seen = []

    def loss_fn(model, batch):
        out = model(batch[0])
        seen.append(out.dtype)
        return torch.nn.functional.mse_loss(out.float(), batch[1])

    model, step, losses = train("adam", loss_fn=loss_fn, precision="bf16-mixed")
    assert step.precision == "bf16-mixed" and set(seen) == {torch.bfloat16}
    assert all(l == l for l in losses)
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_fp16_mixed_on_cpu(server):
    model, step, _ = train("sgd", precision="fp16-mixed")
    if step.precision == "fp32":  # torch 1.13: CPU autocast has no fp16
        server.wait_for(lambda: any(m.get("kind") == "precision_fallback" for m in server.messages("event")))
        ev = [m for m in server.messages("event") if m["kind"] == "precision_fallback"][0]
        assert ev["details"]["reason"] == "unsupported" and ev["details"]["to"] == "fp32"
    else:
        assert step.precision == "fp16-mixed"


def test_repeated_nonfinite_losses_fall_back_to_fp32(server, channel_schema):
    calls = {"n": 0}

    def sometimes_nan(model, batch):
        calls["n"] += 1
        loss = mse(model, batch)
        if 2 <= calls["n"] <= 4:
            loss = loss * float("nan")
        return loss

    model, step, losses = train("sgd", loss_fn=sometimes_nan, precision="bf16-mixed", nonfinite_patience=3)
    assert step.precision == "fp32" and step._amp_dtype is None
    assert all(torch.isfinite(p).all() for p in model.parameters())  # the NaN steps were dropped
    server.wait_for(lambda: any(m.get("kind") == "precision_fallback" for m in server.messages("event")))
    events = [m for m in server.messages("event") if m["kind"] in ("nonfinite_loss", "precision_fallback")]
    assert [m["kind"] for m in events] == ["nonfinite_loss"] * 3 + ["precision_fallback"]
    assert events[-1]["details"] == {"from": "bf16-mixed", "to": "fp32", "reason": "nonfinite_loss", "count": 3}
    for m in events:
        schema_check.check(m, channel_schema)


def test_loader_kwargs_and_configure(monkeypatch):
    assert bt.loader_kwargs() == {"num_workers": 0, "pin_memory": False}
    kw = bt.loader_kwargs(num_workers=2, pin_memory=True, persistent_workers=True, prefetch_factor=4)
    assert kw["num_workers"] == 2 and kw["persistent_workers"] is True and kw["prefetch_factor"] == 4
    assert kw["pin_memory"] == torch.cuda.is_available()
    monkeypatch.setenv("BRIM_KNOBS", '{"num_workers": 0, "prefetch_factor": 8}')
    assert bt.loader_kwargs(num_workers=4, persistent_workers=True) == {"num_workers": 0, "pin_memory": False}
    # the returned arguments are accepted by this torch's DataLoader
    monkeypatch.setenv("BRIM_KNOBS", '{"num_workers": 1, "persistent_workers": true, "prefetch_factor": 3}')
    loader = torch.utils.data.DataLoader(list(range(8)), batch_size=4, **bt.loader_kwargs())
    assert sorted(int(v) for b in loader for v in b) == list(range(8))
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.benchmark)
    try:
        monkeypatch.setenv("BRIM_KNOBS", '{"tf32": true, "cudnn_benchmark": true}')
        assert bt.configure() == {"tf32": True, "cudnn_benchmark": True}
        assert bt.configure(tf32=False, cudnn_benchmark=False) == {"tf32": False, "cudnn_benchmark": False}
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.benchmark = old
        torch.backends.cudnn.allow_tf32 = True
        if hasattr(torch, "set_float32_matmul_precision"):
            torch.set_float32_matmul_precision("highest")


def test_apply_cap_without_cuda(monkeypatch, server):
    if torch.cuda.is_available():
        pytest.skip("CPU-only behaviour")
    assert bt.apply_cap() == {"applied": False, "reason": "no cap set"}
    monkeypatch.setenv("BRIM_MEMORY_CAP_BYTES", str(2 << 30))
    out = bt.apply_cap()
    assert out["applied"] is False and out["device"] == "cpu" and out["cap_bytes"] == 2 << 30
    server.wait_for(lambda: any(m.get("kind") == "cap_applied" for m in server.messages("event")))
