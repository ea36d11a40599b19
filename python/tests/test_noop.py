"""Without BRIM_CHANNEL every call is a cheap no-op; knobs and budgets from the environment."""

import socket
import subprocess
import sys
import threading
import types

import pytest

import brim
from brim import _env, _tracking
from conftest import PYTHON_DIR

# the SDK with no channel, and what its core imports: no PyTorch in them
pytestmark = pytest.mark.any_torch


def test_core_import_uses_only_the_standard_library():
    code = ("import sys; import brim, brim._channel, brim._env, brim._callbacks; "
            "bad = sorted(m for m in ('torch', 'numpy', 'lightning', 'transformers', 'jax') if m in sys.modules); "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], cwd=PYTHON_DIR, capture_output=True, text=True,
                         env={"PYTHONPATH": PYTHON_DIR, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_public_names_are_the_sdk_and_nothing_else():
    # subpackages (brim.torch, brim.lightning, ...) appear once imported: they are the SDK too
    public = sorted(name for name in dir(brim) if not name.startswith("_") and not isinstance(getattr(brim, name), types.ModuleType)
                    or name in ("os", "sys", "signal", "atexit", "threading"))
    assert public == sorted(name for name in brim.__all__ if not name.startswith("_"))


def test_without_channel_nothing_is_sent_and_nothing_connects(monkeypatch, capsys):
    def no_socket(*a, **k):
        raise AssertionError("the SDK must not open a socket without BRIM_CHANNEL")

    monkeypatch.setattr(socket, "socket", no_socket)
    assert not brim.active()
    assert brim.knob("batch_size", 64) == 64
    assert brim.step_budget() is None
    batches = [object() for _ in range(7)]
    tracker = brim.track(batches)
    got = []
    for b in tracker:
        brim.log(loss=1.0)
        got.append(b)
    assert got == batches and all(a is b for a, b in zip(got, batches))  # the very same objects
    assert tracker.steps == 7 and not tracker.stopped_by_budget and tracker.exhausted
    assert brim.event("oom_recovered", step=1) is False
    assert brim.send({"type": "event", "kind": "x"}) is False
    assert brim.should_stop() is False
    assert capsys.readouterr().err == ""


def test_without_channel_tracking_keeps_nothing_and_starts_nothing():
    # what a step costs is measured in bench/ (overhead-parts.bench.py), not judged here: here, that
    # without a channel nothing is kept per step and no helper thread starts
    threads = {t.name for t in threading.enumerate()}
    n = 0
    for _ in brim.track(range(20000)):
        n += 1
    assert n == 20000
    assert len(_tracking._pending) == 0
    assert {t.name for t in threading.enumerate()} <= threads


def test_budget_applies_without_channel_and_across_trackers(monkeypatch):
    monkeypatch.setenv("BRIM_STEP_BUDGET", "5")
    first = brim.track(range(3))
    assert list(first) == [0, 1, 2] and not first.stopped_by_budget
    second = brim.track(range(10))
    assert len(second) == 2
    assert list(second) == [0, 1]
    assert second.stopped_by_budget and brim.budget_reached() and brim.stop_reason() == "budget"
    third = brim.track(range(10))
    assert list(third) == [] and third.stopped_by_budget


def test_knob_casting(monkeypatch):
    monkeypatch.setenv("BRIM_KNOBS", '{"bs": 128, "lr": 1, "amp": "true", "name": 7, "f": 2.0, '
                                     '"prec": "bf16-mixed", "none": null, "lst": [1, 2], "flag": 0}')
    assert brim.knob("bs", 64) == 128
    assert brim.knob("lr", 0.1) == 1.0 and isinstance(brim.knob("lr", 0.1), float)
    assert brim.knob("amp", False) is True
    assert brim.knob("flag", True) is False
    assert brim.knob("name", "x") == "7"
    assert brim.knob("f", 3) == 2 and isinstance(brim.knob("f", 3), int)
    assert brim.knob("prec", "fp32") == "bf16-mixed"
    assert brim.knob("none", 5) == 5  # null: the job's default
    assert brim.knob("missing", "d") == "d"
    assert brim.knob("lst", (0,)) == (1, 2)
    assert brim.knob("bs", None) == 128
    assert brim.knobs()["bs"] == 128


@pytest.mark.parametrize("knobs,name,default", [
    ('{"bs": "many"}', "bs", 64),
    ('{"bs": 2.5}', "bs", 64),
    ('{"bs": true}', "bs", 64),
    ('{"amp": "maybe"}', "amp", False),
    ('{"lr": "fast"}', "lr", 0.1),
    ('{"p": [1]}', "p", "fp32"),
])
def test_bad_knob_values_raise(monkeypatch, knobs, name, default):
    monkeypatch.setenv("BRIM_KNOBS", knobs)
    with pytest.raises(brim.KnobError, match=name):
        brim.knob(name, default)


def test_bad_knobs_json_raises(monkeypatch):
    monkeypatch.setenv("BRIM_KNOBS", "{not json")
    with pytest.raises(brim.KnobError, match="BRIM_KNOBS"):
        brim.knob("x", 1)
    monkeypatch.setenv("BRIM_KNOBS", "[1, 2]")
    with pytest.raises(brim.KnobError, match="object"):
        brim.knob("x", 1)


def test_env_parsing(monkeypatch, capsys):
    monkeypatch.setenv("BRIM_STEP_BUDGET", "abc")
    assert brim.step_budget() is None
    monkeypatch.setenv("BRIM_STEP_BUDGET", "0")
    assert brim.step_budget() is None
    monkeypatch.setenv("BRIM_STEP_BUDGET", "12")
    assert brim.step_budget() == 12
    monkeypatch.setenv("BRIM_WARMUP_STEPS", "3")
    assert brim.warmup_steps() == 3
    monkeypatch.setenv("BRIM_MEMORY_CAP_BYTES", "1073741824")
    assert brim.memory_cap_bytes() == 1 << 30
    monkeypatch.setenv("BRIM_MEMORY_CAP_FRACTION", "1.5")
    assert brim.memory_cap_fraction() is None
    monkeypatch.setenv("BRIM_MEMORY_CAP_FRACTION", "0.5")
    assert brim.memory_cap_fraction() == 0.5
    monkeypatch.setenv("BRIM_FAULT_OOM_AT_STEP", "3, 7,x,")
    assert _env.fault_oom_steps() == frozenset({3, 7})
    monkeypatch.setenv("BRIM_RUN_ID", "r1")
    assert brim.run_id() == "r1"
    err = capsys.readouterr().err
    assert "BRIM_STEP_BUDGET" in err and "BRIM_MEMORY_CAP_FRACTION" in err and "BRIM_FAULT_OOM_AT_STEP" in err


def test_samples_default_and_override():
    from brim._samples import batch_samples as _batch_samples

    class T:
        def __init__(self, *shape):
            self.shape = shape

    assert _batch_samples(T(8, 3)) == 8
    assert _batch_samples((T(5, 2), T(5))) == 5
    assert _batch_samples({"ids": T(3, 16), "mask": T(3, 16)}) == 3
    assert _batch_samples(["a", "b", "c"]) == 3
    assert _batch_samples(42) is None
    assert [s for s in brim.track([1, 2], samples=lambda b: b * 10)] == [1, 2]


def test_break_out_of_loop_reports_the_open_step_later(server):
    from conftest import flush_channel

    for i in brim.track(range(10)):
        if i == 2:
            break
    t = brim.track(range(1))  # a new loop closes the abandoned step when it starts its own
    list(t)
    flush_channel(server, 1 + 4)
    assert [m["step"] for m in server.messages("step")] == [0, 1, 2, 3]


def test_log_may_override_any_step_field(server):
    from conftest import flush_channel

    for _ in brim.track(range(1)):
        brim.log(wait_s=0.5, warmup=True, samples=3, note="x")
    flush_channel(server, 2)
    step = server.messages("step")[0]
    assert step["wait_s"] == 0.5 and step["warmup"] is True and step["samples"] == 3
    assert step["extra"] == {"note": "x"}
