"""The SDK as a user installs it: `pip install` into a fresh venv, imported from outside the
repository. One venv sees the PyTorch of the Python running these tests (2.x in CI's main job, 1.13 in
its smoke job); the other has no torch at all, as for a JAX-only job. Offline: the wheel is built
from a copy of python/ by the tested Python's pip and setuptools (no index, no build isolation: a
fresh venv's own setuptools may lack bdist_wheel), then installed into each venv by that same pip
(pip --python: the venvs are made without a pip of their own, which costs seconds of CPU each)."""

import glob
import os
import shutil
import site
import subprocess
import sys
import venv

import pytest

PYTHON_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    work = tmp_path_factory.mktemp("sdk")
    src = str(work / "python")
    shutil.copytree(PYTHON_DIR, src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(work), src],
                         env=env, capture_output=True, text=True, cwd=str(work))
    assert out.returncode == 0, out.stdout + out.stderr
    return glob.glob(str(work / "brim-*.whl"))[0]


def _venv(tmp_path, wheel, with_torch):
    home = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(str(home))
    py = str(home / "bin" / "python")
    if with_torch:
        # the packages of the Python under test (torch among them) behind the venv's own
        purelib = subprocess.check_output([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip()
        ours = [p for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p)]
        with open(os.path.join(purelib, "zz_tested_python.pth"), "w") as f:
            f.write("\n".join(ours) + "\n")
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", wheel],
                         env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    return py, env


def _run(py, env, tmp_path, code):
    out = subprocess.run([py, "-c", code], env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.strip().splitlines()


@pytest.fixture(scope="module")
def torch_version():
    return pytest.importorskip("torch").__version__


def test_pip_install_next_to_the_tested_pytorch(tmp_path, wheel, torch_version):
    py, env = _venv(tmp_path, wheel, with_torch=True)
    lines = _run(py, env, tmp_path, "import brim, brim.torch, torch; print(brim.__file__); print(torch.__version__); "
                                    "print(brim.knob('batch_size', 32)); print(brim.__version__)")
    assert lines[0].startswith(str(tmp_path / "venv")), "brim imported from %s, not the installed copy" % lines[0]
    assert lines[1] == torch_version
    assert lines[2] == "32"


@pytest.mark.any_torch  # a venv with no PyTorch at all
def test_imports_cleanly_without_torch(tmp_path, wheel):
    py, env = _venv(tmp_path, wheel, with_torch=False)
    lines = _run(py, env, tmp_path,
                 "import sys, brim; print(brim.__file__); print('torch' in sys.modules); "
                 "print(brim.knob('lr', 0.1)); print(sorted(brim.apply_jax_cap(0.5)))")
    assert lines[0].startswith(str(tmp_path / "venv"))
    assert lines[1] == "False"
    assert lines[2] == "0.1"
    assert lines[3] == "['XLA_PYTHON_CLIENT_MEM_FRACTION', 'XLA_PYTHON_CLIENT_PREALLOCATE']"
    with pytest.raises(AssertionError, match="No module named 'torch'"):
        _run(py, env, tmp_path, "import brim.torch")
