"""brim._code: a literal in the job's code varied for one trial, in memory, the file untouched."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from brim._code import edit_source, edits_from_env
from limits import scaled

# source edits of a job's literals: no PyTorch in them
pytestmark = pytest.mark.any_torch

PYTHON_DIR = Path(__file__).resolve().parents[1]


def test_edit_source_replaces_the_literal_on_its_line_only() -> None:
    source = "batch_size = 128  # the batch, batch_size=128 was slow\nother = dict(batch_size=128)\n"
    edited = edit_source(source, [{"line": 1, "name": "batch_size", "value": 512}])
    assert edited == "batch_size = 512  # the batch, batch_size=128 was slow\nother = dict(batch_size=128)\n"


def test_a_line_that_no_longer_holds_the_literal_is_kept(capsys: object) -> None:
    source = "batch_size = args.bs\n"
    assert edit_source(source, [{"line": 1, "name": "batch_size", "value": 64}], "t.py") == source


def test_malformed_edits_are_left_out() -> None:
    assert edits_from_env("not json") == {}
    assert edits_from_env(json.dumps([{"file": "/x.py", "line": "3", "name": "b", "value": 1}])) == {}
    edits = edits_from_env(json.dumps([{"file": "/x.py", "line": 3, "name": "batch_size", "value": 8}]))
    assert list(edits.values()) == [[{"file": "/x.py", "line": 3, "name": "batch_size", "value": 8}]]


def _run(tmp: Path, args: list, edits: list) -> "subprocess.CompletedProcess[str]":
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(PYTHON_DIR / "_brim_boot"), str(PYTHON_DIR)]),
        BRIM_CHANNEL=str(tmp / "no-channel"),
        BRIM_ATTACH="0",
        BRIM_CODE_KNOBS=json.dumps(edits),
    )
    return subprocess.run([sys.executable, *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=scaled(60))


def test_the_main_script_runs_edited_and_ends_as_the_interpreter_would(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""\
        import atexit, sys
        atexit.register(lambda: print("atexit ran"))
        batch_size = 16
        print("batch", batch_size, __name__, sys.argv[1:])
        sys.exit(int(sys.argv[1]))
    """))
    before = script.read_text()
    done = _run(tmp_path, [str(script), "3"], [{"file": str(script), "line": 3, "name": "batch_size", "value": 64}])
    assert done.returncode == 3, done.stderr
    assert done.stdout == "batch 64 __main__ ['3']\natexit ran\n"
    assert script.read_text() == before
    failing = _run(tmp_path, [str(script), "x"], [{"file": str(script), "line": 3, "name": "batch_size", "value": 64}])
    assert failing.returncode == 1 and "ValueError" in failing.stderr


def test_a_module_run_with_dash_m_is_imported_edited(tmp_path: Path) -> None:
    package = tmp_path / "examples"
    package.mkdir()
    (package / "__init__.py").write_text("")
    module = package / "mnist.py"
    module.write_text("def main():\n  batch_size = 128\n  print('batch', batch_size)\n\nif __name__ == '__main__':\n  main()\n")
    done = _run(tmp_path, ["-m", "examples.mnist"], [{"file": str(module), "line": 2, "name": "batch_size", "value": 2048}])
    assert done.returncode == 0, done.stderr
    assert done.stdout == "batch 2048\n"
    plain = _run(tmp_path, ["-m", "examples.mnist"], [])
    assert plain.stdout == "batch 128\n"
