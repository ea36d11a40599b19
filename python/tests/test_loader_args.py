"""BRIM_LOADER_ARGS: a tune trial's arguments for the DataLoader built on one line of the job's code,
passed by the attach as the loader is built, whatever the line writes; the file stays as it is."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from conftest import PYTHON_DIR, FakeBrim  # noqa: E402
from limits import scaled  # noqa: E402

BOOT = os.path.join(PYTHON_DIR, "_brim_boot")

SCRIPT = """\
import sys
import torch
from torch.utils.data import DataLoader, TensorDataset
workers = int(sys.argv[1])
data = TensorDataset(torch.randn(32, 4))
loader = DataLoader(data, 8, True, num_workers=workers)
other = DataLoader(data, batch_size=4)
print(loader.num_workers, loader.persistent_workers, loader.prefetch_factor, other.num_workers, other.persistent_workers)
for (x,) in loader:
    pass
"""


def run(tmp_path, args, edits):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIM_")}
    env["PYTHONPATH"] = os.pathsep.join([BOOT, PYTHON_DIR])
    env["BRIM_LOADER_ARGS"] = json.dumps(edits)
    srv = FakeBrim()  # the attach works under brim only
    env["BRIM_CHANNEL"] = srv.path
    try:
        done = subprocess.run([sys.executable, str(script), *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=scaled(120))
        assert done.returncode == 0, done.stderr
        assert script.read_text() == SCRIPT
        return done.stdout.split(), [m for m in srv.messages("event") if m.get("kind") == "loader"]
    finally:
        srv.close()


def test_the_loader_on_the_named_line_gets_the_trial_s_arguments_and_no_other(tmp_path):
    place = str(tmp_path / "train.py")
    edits = [{"file": place, "line": 6, "name": "persistent_workers", "value": True},
             {"file": place, "line": 6, "name": "prefetch_factor", "value": 4},
             {"file": place, "line": 6, "name": "num_workers", "value": 2}]
    # num_workers is given by keyword on the line, from a variable: the trial's 2 wins over the job's 0
    out, loaders = run(tmp_path, ["0"], edits)
    assert out == ["2", "True", "4", "0", "False"]
    first = [m["details"] for m in loaders if m["details"]["where"].endswith("train.py:6")]
    assert first and first[0]["persistent_workers"] is True and first[0]["prefetch_factor"] == 4
    assert first[0]["brim_args"] == {"persistent_workers": True, "prefetch_factor": 4, "num_workers": 2}


def test_a_trial_without_workers_keeps_the_defaults_that_need_workers(tmp_path):
    place = str(tmp_path / "train.py")
    edits = [{"file": place, "line": 6, "name": "persistent_workers", "value": True},
             {"file": place, "line": 6, "name": "num_workers", "value": 0}]
    out, _ = run(tmp_path, ["2"], edits)
    assert out[:2] == ["0", "False"]


def test_without_the_environment_nothing_changes(tmp_path):
    out, loaders = run(tmp_path, ["0"], [])
    assert out[:2] == ["0", "False"] and all("brim_args" not in m["details"] for m in loaders)
    malformed = [{"file": str(tmp_path / "train.py"), "line": "six", "name": "num_workers", "value": 2}]
    assert run(tmp_path, ["0"], malformed)[0][:2] == ["0", "False"]
