"""brim.lightning and brim.hf. Lightning and transformers are not installed here: these tests run
the callbacks against stand-in modules that implement only what the callbacks use (a Callback /
TrainerCallback base class, a trainer with should_stop, HF-style args/control objects). They test
our logic; the integration with the real frameworks was tested on an H100 host (Lightning 2.6.6,
transformers 5.17, issue #15) and by test/examples/frameworks.e2e.test.ts wherever they are installed."""

import importlib
import importlib.util
import sys
import time
import types

import pytest

import brim
import schema_check
from conftest import flush_channel

# the framework callbacks, on stand-in modules: no PyTorch release in them
pytestmark = pytest.mark.any_torch


@pytest.fixture
def fake_lightning(monkeypatch):
    real = importlib.util.find_spec("lightning")
    if real is not None:
        pytest.skip("real lightning installed: the stand-in would shadow it")
    pkg = types.ModuleType("lightning")
    pl = types.ModuleType("lightning.pytorch")

    class Callback:
        pass

    pl.Callback = Callback
    pkg.pytorch = pl
    monkeypatch.setitem(sys.modules, "lightning", pkg)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", pl)
    monkeypatch.delitem(sys.modules, "brim.lightning", raising=False)
    mod = importlib.import_module("brim.lightning")
    yield mod
    sys.modules.pop("brim.lightning", None)


@pytest.fixture
def fake_transformers(monkeypatch):
    if importlib.util.find_spec("transformers") is not None:
        pytest.skip("real transformers installed: the stand-in would shadow it")
    tf = types.ModuleType("transformers")

    class TrainerCallback:
        pass

    tf.TrainerCallback = TrainerCallback
    monkeypatch.setitem(sys.modules, "transformers", tf)
    monkeypatch.delitem(sys.modules, "brim.hf", raising=False)
    mod = importlib.import_module("brim.hf")
    yield mod
    sys.modules.pop("brim.hf", None)


class Shape:
    def __init__(self, *shape):
        self.shape = shape


def test_lightning_callback_reports_and_stops(fake_lightning, server, monkeypatch, channel_schema):
    monkeypatch.setenv("BRIM_STEP_BUDGET", "3")
    assert fake_lightning.AVAILABLE
    cb = fake_lightning.BrimCallback()
    trainer = types.SimpleNamespace(should_stop=False, accumulate_grad_batches=2)
    cb.on_train_start(trainer, None)
    batch = (Shape(16, 5), Shape(16))
    for i in range(10):
        time.sleep(0.005)  # "loading"
        cb.on_train_batch_start(trainer, None, batch, i)
        time.sleep(0.01)  # "computing"
        cb.on_train_batch_end(trainer, None, {"loss": 0.5 * i}, batch, i)
        if trainer.should_stop:
            break
    assert i == 2 and trainer.should_stop
    flush_channel(server, 1 + 3 + 1)
    steps = server.messages("step")
    assert [s["step"] for s in steps] == [0, 1, 2]
    assert [s["loss"] for s in steps] == [0.0, 0.5, 1.0]
    assert all(s["samples"] == 16 and s["accumulation"] == 2 for s in steps)
    assert all(s["compute_s"] >= 0.009 and s["wait_s"] >= 0.004 for s in steps)
    for m in server.messages():
        schema_check.check(m, channel_schema)


def test_hf_callback_reports_and_stops(fake_transformers, server, monkeypatch, channel_schema):
    monkeypatch.setenv("BRIM_STEP_BUDGET", "2")
    cb = fake_transformers.BrimTrainerCallback()
    args = types.SimpleNamespace(per_device_train_batch_size=8, gradient_accumulation_steps=4)
    control = types.SimpleNamespace(should_training_stop=False)
    cb.on_train_begin(args, None, control)
    for i in range(5):
        cb.on_step_begin(args, None, control)
        cb.on_step_end(args, None, control)
        cb.on_log(args, None, control, logs={"loss": 2.0 - i})
        if control.should_training_stop:
            break
    assert i == 1
    flush_channel(server, 1 + 2 + 1)
    steps = server.messages("step")
    assert [(s["samples"], s["micro_batch"], s["accumulation"]) for s in steps] == [(32, 8, 4)] * 2
    assert [s["loss"] for s in steps] == [None, 2.0]  # the loss logged after the previous step
    for m in server.messages():
        schema_check.check(m, channel_schema)


def test_placeholders_without_the_frameworks(monkeypatch):
    monkeypatch.setitem(sys.modules, "lightning", None)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)
    monkeypatch.setitem(sys.modules, "pytorch_lightning", None)
    monkeypatch.setitem(sys.modules, "transformers", None)
    monkeypatch.delitem(sys.modules, "brim.lightning", raising=False)
    monkeypatch.delitem(sys.modules, "brim.hf", raising=False)
    try:
        lt = importlib.import_module("brim.lightning")
        hf = importlib.import_module("brim.hf")
        assert not lt.AVAILABLE and not hf.AVAILABLE
        with pytest.raises(ImportError, match="lightning"):
            lt.BrimCallback()
        with pytest.raises(ImportError, match="transformers"):
            hf.BrimTrainerCallback()
    finally:
        sys.modules.pop("brim.lightning", None)
        sys.modules.pop("brim.hf", None)
    assert brim is not None
