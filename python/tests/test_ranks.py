"""A rank of a distributed job that runs out of memory (python/brim/_ranks.py): it exits with code 75
and tells brim the knobs it ran with; brim's knobs file is what the next round reads."""

import json
import os
import subprocess
import sys

import schema_check
from conftest import PYTHON_DIR, FakeBrim
from limits import scaled

from brim import _ranks

SCRIPT = """
import brim  # the package installs nothing by itself: the attach does
from brim import _ranks
_ranks.install()
print("batch", brim.knob("batch_size", 32), flush=True)
class OutOfMemoryError(RuntimeError):
    pass
raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
"""


def run(env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIM_")}
    env.update({"PYTHONPATH": PYTHON_DIR, **env_extra})
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=scaled(60))


def test_is_oom_by_name_or_message():
    class OutOfMemoryError(RuntimeError):
        pass

    assert _ranks.is_oom(OutOfMemoryError("x"))
    assert _ranks.is_oom(RuntimeError("CUDA out of memory. Tried to allocate"))
    assert not _ranks.is_oom(ValueError("out of memory"))
    assert not _ranks.is_oom(RuntimeError("shape mismatch"))


def test_a_rank_out_of_memory_exits_75_and_names_its_knobs(tmp_path, channel_schema):
    srv = FakeBrim()
    try:
        knobs_file = tmp_path / "knobs.json"
        knobs_file.write_text(json.dumps({"batch_size": 16, "accumulation": 2}))
        out = run({"BRIM_CHANNEL": srv.path, "WORLD_SIZE": "2", "RANK": "1", "BRIM_KNOBS": '{"batch_size": 32}',
                   "BRIM_KNOBS_FILE": str(knobs_file)})
        assert out.returncode == _ranks.OOM_EXIT_CODE, out.stderr
        assert "batch 16" in out.stdout  # the file brim wrote wins over BRIM_KNOBS
        assert "OutOfMemoryError: CUDA out of memory" in out.stderr  # the traceback as Python prints it
        assert "brim: rank 1 ran out of memory" in out.stderr
        srv.wait_for(lambda: any(m.get("kind") == "oom_exit" for m in srv.messages("event")))
        events = [m for m in srv.messages("event") if m.get("kind") == "oom_exit"]
        assert events[0]["details"]["knobs"] == {"batch_size": 16, "accumulation": 2}
        assert events[0]["details"]["rank"] == 1
        for m in srv.messages():
            schema_check.check(m, channel_schema)
    finally:
        srv.close()


def test_a_single_process_keeps_python_s_exit_code():
    out = run({"BRIM_CHANNEL": "/nonexistent/brim.sock", "WORLD_SIZE": "1"})
    assert out.returncode == 1


GROUP = """
import os, tempfile, torch, torch.distributed as dist
from brim import _attach, _state
_attach.patch_torch(torch)
dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
_state.close()
"""


def test_a_rank_learnt_at_init_process_group_is_told(channel_schema):
    srv = FakeBrim()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRIM_") and k not in ("RANK", "LOCAL_RANK")}
        env.update({"PYTHONPATH": PYTHON_DIR, "BRIM_CHANNEL": srv.path})
        out = subprocess.run([sys.executable, "-c", GROUP], env=env, capture_output=True, text=True, timeout=scaled(60))
        assert out.returncode == 0, out.stderr
        srv.wait_for(lambda: any(m.get("kind") == "rank_known" for m in srv.messages("event")))
        known = [m for m in srv.messages("event") if m.get("kind") == "rank_known"]
        assert known[0]["details"] == {"rank": 0, "world_size": 1, "local_rank": None}
        for m in srv.messages():
            schema_check.check(m, channel_schema)
    finally:
        srv.close()
