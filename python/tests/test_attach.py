"""The attach in real child processes (the way brim's runner starts a job): the sitecustomize first on
PYTHONPATH, a fake brim server, unmodified PyTorch code."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

import schema_check  # noqa: E402
from conftest import PYTHON_DIR, FakeBrim  # noqa: E402

from brim._samples import BatchDim, batch_samples  # noqa: E402
from limits import scaled  # noqa: E402

BOOT = os.path.join(PYTHON_DIR, "_brim_boot")


def run(code, srv=None, env_extra=None, pythonpath=None, timeout=60):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIM_")}
    env["PYTHONPATH"] = os.pathsep.join([BOOT] + (pythonpath or []) + [PYTHON_DIR])
    if srv is not None:
        env["BRIM_CHANNEL"] = srv.path
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=scaled(timeout))


PRELUDE = """
import torch
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Linear(4, 1)
def batch(n=8):
    x = torch.randn(n, 4)
    return model(x).pow(2).mean()
"""


def steps_of(srv):
    return [m for m in srv.messages("step")]


def said(out):
    """The job's 'key=value' lines."""
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


# Jobs several tests read, each started once (a job process imports torch: seconds of CPU), on a fake
# brim of its own unless "channel" is False. What each prints: the threads torch runs, whether the
# attach is in (its mark on Optimizer.__init__, its module loaded), the matmul precision, and whether
# the job's own seed set after import gave what the import's did.
SHARED_CODE = """
import os, sys, torch
first = torch.rand(3).tolist()
print("threads=%d" % torch.get_num_threads())
print("attach=%s %s" % (getattr(torch.optim.Optimizer.__init__, "_brim_attach", False), "brim._attach" in sys.modules))
print("matmul=%s" % torch.get_float32_matmul_precision())
torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1)
torch.manual_seed(int(os.environ["BRIM_SEED"]))
print("seed_kept=%s" % (first == torch.rand(3).tolist()))
"""
SHARED = {
    # under brim with a trial's seed and no knobs: the defaults are read
    "default": {"OMP_NUM_THREADS": "2", "BRIM_SEED": "123"},
    # a trial's values for several knobs at once, as tune gives them
    "trial": {"OMP_NUM_THREADS": "2", "BRIM_SEED": "123", "BRIM_KNOBS": '{"cpu_threads": 1, "matmul_precision": "high"}'},
    # not under brim, whatever the environment says
    "alone": {"channel": False, "OMP_NUM_THREADS": "2", "BRIM_SEED": "123",
              "BRIM_KNOBS": '{"cpu_threads": 1, "matmul_precision": "high"}'},
}


@pytest.fixture(scope="module")
def shared():
    """shared(name) -> (the finished process, every message its fake brim got)."""
    done = {}

    def get(name):
        if name not in done:
            env = dict(SHARED[name])
            srv = FakeBrim() if env.pop("channel", True) else None
            try:
                out = run(SHARED_CODE, srv, env)
                messages = []
                if srv is not None:
                    srv.wait_for(lambda: all(c.closed for c in srv.connections))  # every line read
                    messages = srv.messages()
            finally:
                if srv is not None:
                    srv.close()
            done[name] = (out, messages)
        return done[name]

    return get


def test_counts_each_optimizer_step_once_nested_and_scheduled(srv, channel_schema):
    out = run(PRELUDE + """
class MySGD(torch.optim.SGD):
    def step(self, closure=None):          # a subclass calling super().step(): one step
        return super().step(closure)
opt = MySGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, 2)  # wraps opt.step on the instance
for _ in range(5):
    opt.zero_grad(); batch().backward(); opt.step(); sched.step()
print("ok")
""", srv)
    assert out.returncode == 0, out.stderr
    assert "Warning" not in out.stderr and "warning" not in out.stderr, out.stderr
    steps = steps_of(srv)
    assert [s["step"] for s in steps] == [0, 1, 2, 3, 4]
    assert all(s["source"] == "attach" and s["trigger"] == "optimizer" and s["samples"] == 8 for s in steps)
    for m in srv.messages():
        schema_check.check(m, channel_schema)


def test_two_optimizers_on_one_batch_count_one_step(srv):
    out = run(PRELUDE + """
from torch.utils.data import DataLoader, TensorDataset
d = torch.nn.Linear(4, 1); g = torch.nn.Linear(4, 4)
od = torch.optim.SGD(d.parameters(), lr=0.1); og = torch.optim.SGD(g.parameters(), lr=0.1)
for (x,) in DataLoader(TensorDataset(torch.randn(24, 4)), batch_size=6):
    od.zero_grad(); d(x).mean().backward(); od.step()
    og.zero_grad(); d(g(x)).mean().backward(); og.step()
""", srv)
    assert out.returncode == 0, out.stderr
    steps = steps_of(srv)
    assert len(steps) == 4 and all(s["samples"] == 6 for s in steps)


def test_budget_ends_a_loop_without_loader_with_exit_zero(srv):
    out = run(PRELUDE + """
opt = torch.optim.Adam(model.parameters())
for i in range(1000):
    opt.zero_grad(); batch().backward(); opt.step()
    print("did", i + 1, flush=True)
""", srv, {"BRIM_STEP_BUDGET": "7"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "did 7"
    assert len(steps_of(srv)) == 7
    assert [e["details"]["budget"] for e in srv.messages("event") if e["kind"] == "budget_reached"] == [7]


def test_backward_counts_only_without_an_optimizer(srv):
    out = run(PRELUDE + """
for i in range(4):
    model.zero_grad(); batch().backward()
    with torch.no_grad():
        for p in model.parameters(): p -= 0.1 * p.grad
""", srv)
    assert out.returncode == 0, out.stderr
    # the fake server reads on its own thread: its lines may still be arriving when the job has exited
    srv.wait_for(lambda: len(steps_of(srv)) >= 4, timeout=5)
    assert [s["trigger"] for s in steps_of(srv)] == ["backward"] * 4


def test_accumulation_sums_the_batches_of_one_step_and_sees_autocast(srv):
    out = run(PRELUDE + """
from torch.utils.data import DataLoader, TensorDataset
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(40, 4)), batch_size=5)
for i, (x,) in enumerate(loader):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(x).float().mean()
    loss.backward()
    if i % 2 == 1:
        opt.step(); opt.zero_grad()
""", srv)
    assert out.returncode == 0, out.stderr
    steps = steps_of(srv)
    assert len(steps) == 4
    assert all(s["samples"] == 10 and s["accumulation"] == 2 and s["micro_batch"] == 5 for s in steps)
    assert all(s["precision"] == "bf16-mixed" for s in steps)
    assert all(s["wait_s"] is not None and s["compute_s"] is not None for s in steps)


def test_sdk_steps_win_and_attach_stands_back(srv):
    out = run(PRELUDE + """
import brim
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in brim.track([torch.randn(3, 4) for _ in range(6)]):
    opt.zero_grad(); model(x).mean().backward(); opt.step()
""", srv)
    assert out.returncode == 0, out.stderr
    steps = steps_of(srv)
    assert [s["step"] for s in steps] == list(range(6))
    assert all(s["source"] == "sdk" and s["samples"] == 3 for s in steps)


def test_off_switch_and_no_channel_leave_torch_untouched(srv, shared):
    code = PRELUDE + """
print(getattr(torch.optim.Optimizer.__init__, "_brim_attach", False), "brim._attach" in __import__("sys").modules)
"""
    off = run(code, srv, {"BRIM_ATTACH": "0"})
    assert off.returncode == 0 and off.stdout.split() == ["False", "False"], off.stderr
    bare, _ = shared("alone")
    assert bare.returncode == 0 and said(bare)["attach"] == "False False", bare.stderr
    on, _ = shared("default")
    assert on.returncode == 0 and said(on)["attach"] == "True True", on.stderr


def test_no_torch_import_unless_the_job_imports_it(srv):
    out = run("import sys; print('torch' in sys.modules)", srv)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
    assert srv.messages() == []


def test_the_shadowed_sitecustomize_runs_first(srv, tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE_RAN = True\n")
    out = run("import builtins, sys; print(getattr(builtins, 'USER_SITE_RAN', False), 'brim._attach' in sys.modules)",
              srv, pythonpath=[str(tmp_path)])
    assert out.returncode == 0 and out.stdout.split() == ["True", "True"], out.stderr


def test_a_broken_user_sitecustomize_is_reported_like_python_does(srv, tmp_path):
    (tmp_path / "sitecustomize.py").write_text("raise RuntimeError('boom')\n")
    out = run("print('ran')", srv, pythonpath=[str(tmp_path)])
    assert out.returncode == 0 and out.stdout.strip() == "ran"
    assert "Error in sitecustomize" in out.stderr and "boom" in out.stderr


# -- the batch dimension ---------------------------------------------------------------------------

def test_batch_dimension_rules():
    import torch

    T = torch.zeros
    assert batch_samples(T(8, 3)) == 8
    assert batch_samples((T(5, 2), T(5))) == 5
    assert batch_samples({"ids": T(3, 16), "mask": T(3, 16), "labels": T(3)}) == 3
    assert batch_samples([{"x": T(4, 2)}, (T(4),)]) == 4  # nested
    assert batch_samples(["a", "b", "c"]) == 3
    assert batch_samples(42) is None
    # sequence-first (seq, batch) with the loader's batch size known
    assert batch_samples((T(35, 20), T(700)), hint=20) == 20
    assert batch_samples((T(35, 20, 8), T(35, 20)), hint=20) == 20
    # without a hint: dim 1 when dim 0 disagrees and the 2-d tensors agree on dim 1
    assert batch_samples((T(35, 20), T(35 * 20), T(12, 20, 4))) == 20
    # ambiguous: unknown rather than wrong
    assert batch_samples((T(35, 20), T(700))) is None


def test_batch_dimension_follows_a_short_last_batch_and_the_knob(monkeypatch):
    import torch

    dim = BatchDim(hint=20)
    assert dim((torch.zeros(35, 20), torch.zeros(700))) == 20
    assert dim((torch.zeros(35, 7), torch.zeros(245))) == 7  # the last, shorter batch: same place
    monkeypatch.setenv("BRIM_KNOBS", '{"batch_size": 16}')
    assert BatchDim()((torch.zeros(35, 16), torch.zeros(35, 16))) == 16


def knob_reads(messages):
    return [m["details"] for m in messages if m["type"] == "event" and m["kind"] == "knob_read"]


def test_cpu_threads_is_read_as_a_knob_and_set_to_a_trials_value(srv, shared):
    before, said_before = shared("default")
    assert before.returncode == 0, before.stderr
    assert said(before)["threads"] == "2"
    assert [(d["name"], d["value"], d["source"]) for d in knob_reads(said_before)] == [("cpu_threads", 2, "default")]

    trial, _ = shared("trial")
    assert trial.returncode == 0, trial.stderr
    assert said(trial)["threads"] == "1"
    # a process that builds no optimizer (a launcher importing torch) says nothing
    quiet = run("import torch", env_extra={"BRIM_CHANNEL": srv.path, "BRIM_KNOBS": '{"cpu_threads": 1}'})
    assert quiet.returncode == 0, quiet.stderr
    assert srv.messages() == []

    # a job that sets its own threads after import runs that count: it is the job's configuration
    own = run("""
import torch
torch.set_num_threads(1)
torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1)
""", srv, env_extra={"OMP_NUM_THREADS": "2"})
    assert own.returncode == 0, own.stderr
    assert [(d["value"], d["default"], d["source"]) for d in knob_reads(srv.messages())] == [(1, 1, "code")]


def test_matmul_precision_is_set_to_a_trials_value_and_said_only_for_a_gpu_optimizer(srv, shared):
    trial, said_trial = shared("trial")
    assert trial.returncode == 0, trial.stderr
    assert said(trial)["matmul"] == "high"
    # its parameters are on the CPU: a setting of CUDA matmuls is not this process's configuration
    names = [d["name"] for d in knob_reads(said_trial)]
    assert "matmul_precision" not in names and "cpu_threads" in names
    # a value torch does not take leaves the job's own, and the job runs
    code = """
import torch
print(torch.get_float32_matmul_precision())
torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1)
"""
    odd = run(code, srv, env_extra={"BRIM_KNOBS": '{"matmul_precision": "fastest"}'})
    assert odd.returncode == 0, odd.stderr
    assert odd.stdout.split() == ["highest"]


def test_a_trial_s_seed_is_torch_s_at_import_and_the_job_s_own_seed_wins_after(shared):
    seeded, _ = shared("default")
    assert seeded.returncode == 0, seeded.stderr
    assert said(seeded)["seed_kept"] == "True"
    # not under brim: torch is left alone, whatever the environment says
    alone, _ = shared("alone")
    assert alone.returncode == 0, alone.stderr
    assert said(alone)["seed_kept"] == "False"
