"""A real training process (tests/jobs/train_small.py) under a fake brim: the channel, several
processes on it, the step budget, knobs, server requests, injected OOM."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

import schema_check  # noqa: E402
from conftest import PYTHON_DIR, FakeBrim  # noqa: E402
from limits import scaled  # noqa: E402

JOB = os.path.join(os.path.dirname(__file__), "jobs", "train_small.py")


def run_job(n_batches, num_workers, env_extra, timeout=60):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIM_")}
    env["PYTHONPATH"] = PYTHON_DIR
    env.update(env_extra)
    return subprocess.run([sys.executable, JOB, str(n_batches), str(num_workers)], env=env,
                          capture_output=True, text=True, timeout=scaled(timeout))


@pytest.fixture
def brim_server():
    srv = FakeBrim()
    yield srv
    srv.close()


def test_job_under_brim_reports_and_stops_at_budget(brim_server, channel_schema):
    out = run_job(40, 2, {"BRIM_CHANNEL": brim_server.path, "BRIM_STEP_BUDGET": "5",
                          "BRIM_WARMUP_STEPS": "2", "BRIM_KNOBS": '{"batch_size": 3}',
                          "BRIM_RUN_ID": "t1"})
    assert out.returncode == 0, out.stderr
    assert "done steps=5 budget=True" in out.stdout
    assert "brim: warning" not in out.stderr
    # the job's processes all connected; every connection starts with its own hello
    brim_server.wait_for(lambda: sum(c.closed for c in brim_server.connections) == len(brim_server.connections)
                         and len(brim_server.connections) >= 3)
    roles = {}
    for conn in brim_server.connections:
        msgs = conn.messages
        assert msgs and msgs[0]["type"] == "hello"
        assert len({m["pid"] for m in msgs}) == 1
        for m in msgs:
            schema_check.check(m, channel_schema)
        roles.setdefault(msgs[0]["role"], []).append(msgs)
        assert msgs[0]["run_id"] == "t1" and msgs[0]["framework"] == "torch" and "torch" in msgs[0]["versions"]
    assert len(roles["main"]) == 1 and len(roles["loader_worker"]) == 2
    for worker in roles["loader_worker"]:
        assert [m["kind"] for m in worker[1:]] == ["worker_started"]
    main = roles["main"][0]
    steps = [m for m in main if m["type"] == "step"]
    assert [s["step"] for s in steps] == [0, 1, 2, 3, 4]
    assert [s["warmup"] for s in steps] == [True, True, False, False, False]
    assert all(s["samples"] == 3 and s["micro_batch"] == 3 and s["accumulation"] == 1 for s in steps)
    assert all(isinstance(s["loss"], float) and s["wait_s"] >= 0 and s["compute_s"] > 0 for s in steps)
    kinds = [m["kind"] for m in main if m["type"] == "event"]
    assert kinds[0] == "job_start"
    assert "knob_read" in kinds and kinds[-1] == "budget_reached"
    budget = [m for m in main if m.get("kind") == "budget_reached"][0]
    assert budget["details"] == {"budget": 5, "steps": 5} and budget["step"] == 4


def test_job_without_brim_runs_unchanged():
    out = run_job(12, 0, {})
    assert out.returncode == 0, out.stderr
    assert "done steps=12 budget=False split=1" in out.stdout
    assert out.stderr == ""


def test_job_with_unreachable_channel_runs_with_one_warning(tmp_path):
    out = run_job(12, 0, {"BRIM_CHANNEL": str(tmp_path / "gone.sock")})
    assert out.returncode == 0, out.stderr
    assert "done steps=12" in out.stdout
    assert out.stderr.count("brim: warning:") == 1


def test_job_recovers_from_injected_oom_and_obeys_shrink(channel_schema):
    def on_message(conn, msg):
        if msg["type"] == "step" and msg["step"] == 4:
            conn.send({"v": 1, "type": "shrink", "reason": "test"})

    srv = FakeBrim(on_message)
    try:
        out = run_job(30, 0, {"BRIM_CHANNEL": srv.path, "BRIM_FAULT_OOM_AT_STEP": "1",
                              "BRIM_KNOBS": '{"batch_size": 8}', "TEST_PAUSE_AT_STEP": "6"})
        assert out.returncode == 0, out.stderr
        srv.wait_for(lambda: srv.connections and srv.connections[0].closed)
        msgs = srv.connections[0].messages
        for m in msgs:
            schema_check.check(m, channel_schema)
        steps = [m for m in msgs if m["type"] == "step"]
        assert len(steps) == 30
        assert steps[0]["micro_batch"] == 8 and steps[1]["micro_batch"] == 4 and steps[1]["accumulation"] == 2
        # the shrink sent after step 4 was applied by step 6 (the job pauses there)
        assert [s["micro_batch"] for s in steps[7:]] == [2] * 23 and steps[-1]["accumulation"] == 4
        kinds = [m["kind"] for m in msgs if m["type"] == "event"]
        assert kinds.count("oom_recovered") == 1 and kinds.count("shrink_applied") == 1
        assert "split=4" in out.stdout
    finally:
        srv.close()
