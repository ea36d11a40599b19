"""The lazy data-wait timer: events are only queried, steps come out in order once known."""

import time

import pytest

from brim._timing import DeviceClock, PendingSteps

# step timing on a stand-in of torch.cuda.Event: no PyTorch release in it
pytestmark = pytest.mark.any_torch


class FakeEvent:
    """torch.cuda.Event's interface; the test decides when the device reaches it and when."""

    def __init__(self, log):
        self.log = log
        self.done = False
        self.at_ms = None
        self.synced = False

    def record(self):
        self.log.append(("record", self))
        self.done = False

    def query(self):
        self.log.append(("query", self))
        return self.done

    def synchronize(self):
        self.synced = True
        self.done = True

    def elapsed_time(self, other):
        assert self.done and other.done, "elapsed_time needs both events completed"
        return other.at_ms - self.at_ms


def test_wait_is_unknown_until_the_end_event_completes_and_never_blocks():
    log = []
    clock = DeviceClock(event_factory=lambda: FakeEvent(log))
    token = clock.fetch_begin()
    time.sleep(0.02)
    wait = clock.fetch_end(token)
    begin, end = token[1], wait._end
    assert not wait.ready() and wait.value() is None
    assert not begin.synced and not end.synced
    # the device drained its queue 5 ms into the fetch and then idled 15 ms until the batch came
    begin.done, begin.at_ms = True, 5.0
    end.done, end.at_ms = True, 20.0
    assert wait.ready()
    assert abs(wait.value() - 0.015) < 1e-9
    assert len(clock._pool) == 2  # events are reused


def test_idle_time_is_capped_by_the_host_fetch_time():
    log = []
    clock = DeviceClock(event_factory=lambda: FakeEvent(log))
    token = clock.fetch_begin()
    wait = clock.fetch_end(token)
    token[1].done, token[1].at_ms = True, 0.0
    wait._end.done, wait._end.at_ms = True, 10_000.0
    assert wait.value() == wait.host_s


def test_pending_steps_come_out_in_order_when_known():
    log = []
    clock = DeviceClock(event_factory=lambda: FakeEvent(log))
    pending = PendingSteps()
    waits = []
    for i in range(3):
        token = clock.fetch_begin()
        w = clock.fetch_end(token)
        w.host_s = 0.010
        waits.append((token[1], w))
        pending.push({"step": i, "wait_s": None, "compute_s": None}, w, 0.050)
    assert pending.ready() == []
    # step 1 resolves first: it must wait behind step 0
    b1, w1 = waits[1]
    b1.done, b1.at_ms, w1._end.done, w1._end.at_ms = True, 0.0, True, 4.0
    assert pending.ready() == []
    b0, w0 = waits[0]
    b0.done, b0.at_ms, w0._end.done, w0._end.at_ms = True, 0.0, True, 0.0
    out = pending.ready()
    assert [s["step"] for s in out] == [0, 1]
    assert out[0]["wait_s"] == 0.0 and abs(out[0]["compute_s"] - 0.050) < 1e-9
    assert abs(out[1]["wait_s"] - 0.004) < 1e-9 and abs(out[1]["compute_s"] - 0.046) < 1e-9
    # at the end (exit, budget) the rest is waited for
    assert [s["step"] for s in pending.ready(block=True)] == [2]
    assert waits[2][1]._end is None  # released after the blocking resolve


def test_cpu_wait_is_the_host_fetch_time():
    clock = DeviceClock()  # no torch CUDA initialised here: host time only
    token = clock.fetch_begin()
    time.sleep(0.01)
    wait = clock.fetch_end(token)
    assert wait.ready() and wait.value() >= 0.009
    pending = PendingSteps()
    pending.push({"step": 0}, wait, 0.03)
    (step,) = pending.ready()
    assert step["wait_s"] == wait.value() and abs(step["wait_s"] + step["compute_s"] - 0.03) < 1e-9


def test_broken_events_fall_back_to_host_time():
    class Broken(FakeEvent):
        def query(self):
            raise RuntimeError("CUDA error: device-side assert")

    clock = DeviceClock(event_factory=lambda: Broken([]))
    wait = clock.fetch_end(clock.fetch_begin())
    assert wait.ready() and wait.value() == wait.host_s


def test_no_synchronize_in_the_sdk_step_path():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "brim"
    # _timing (data waits) and _loss (the loss's copy) wait for the device only with block=True, at
    # exit or at the step budget (test_loss checks that a step's loss never waits before)
    allowed = ("_timing.py", "_loss.py")
    offenders = [str(p) for p in root.rglob("*.py") if "synchronize()" in p.read_text() and p.name not in allowed]
    assert offenders == []
