"""Loaders told apart by object and by use, in real child processes (the attach on unmodified PyTorch):
two loaders built at one line of code are two loaders; batches fetched with gradients off
(validation, test) are never training samples, unless a step trains on them."""

import pytest

pytest.importorskip("torch")

from test_attach import run as run_attached  # noqa: E402


def run(code, srv):
    return run_attached(code, srv, timeout=120)


PRELUDE = """
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
def loader(n):                       # one line builds every loader, as Lightning's hooks do
    return DataLoader(TensorDataset(torch.randn(n, 4)), batch_size=8)
train, val = loader(48), loader(16)
def train_on(x):
    opt.zero_grad(); model(x).pow(2).mean().backward(); opt.step()
"""


def events(srv, kind):
    return [m["details"] for m in srv.messages("event") if m["kind"] == kind]


def test_two_loaders_at_one_line_are_two_loaders_each_with_its_use(srv):
    out = run(PRELUDE + """
with torch.no_grad():                # a sanity check before training: two validation batches
    for i, (x,) in enumerate(val):
        model(x)
        if i == 1: break
for epoch in range(2):
    for (x,) in train:
        train_on(x)
    with torch.no_grad():
        for (x,) in val:
            model(x)
""", srv)
    assert out.returncode == 0, out.stderr
    built = events(srv, "loader")
    assert [(b["loader"], b["dataset_len"]) for b in built] == [(0, 48), (1, 16)]
    assert built[0]["where"] == built[1]["where"]
    uses = {(u["loader"], u["use"]) for u in events(srv, "loader_use")}
    assert uses == {(0, "train"), (1, "eval")}
    steps = srv.messages("step")
    assert len(steps) == 12
    # step 0 counts its own batch, not the two validation batches fetched before it
    assert [s["samples"] for s in steps] == [8] * 12
    assert [s["accumulation"] for s in steps] == [1] * 12


def test_batches_fetched_with_gradients_off_and_then_trained_on_count(srv):
    out = run(PRELUDE + """
it = iter(train)
for _ in range(4):
    with torch.no_grad():            # fetched (and moved) with gradients off, then trained on
        (x,) = next(it)
    train_on(x)
""", srv)
    assert out.returncode == 0, out.stderr
    assert [s["samples"] for s in srv.messages("step")] == [8, 8, 8, 8]
    assert {(u["loader"], u["use"]) for u in events(srv, "loader_use")} == {(0, "train")}


def test_a_loader_built_again_each_epoch_over_the_same_data_is_one_loader(srv):
    out = run(PRELUDE + """
data = TensorDataset(torch.randn(16, 4))
for epoch in range(3):
    for (x,) in DataLoader(data, batch_size=8):
        train_on(x)
""", srv)
    assert out.returncode == 0, out.stderr
    assert [b["dataset_len"] for b in events(srv, "loader")] == [48, 16, 16]
    assert len(srv.messages("step")) == 6


def test_a_step_that_ran_a_validation_pass_is_not_a_steady_step(srv):
    out = run(PRELUDE + """
for i, (x,) in enumerate(train):
    train_on(x)
    if i == 2:                       # a validation pass between two optimizer steps
        with torch.no_grad():
            for (v,) in val:
                model(v)
""", srv)
    assert out.returncode == 0, out.stderr
    steps = srv.messages("step")
    assert [s["samples"] for s in steps] == [8] * 6
    # the step whose time holds the two validation batches (step 3) is left out of the steady steps
    flagged = [s["step"] for s in steps if s.get("warmup")]
    assert 3 in flagged and 4 not in flagged and 2 not in flagged


def test_a_loader_accelerate_prepares_is_the_jobs_loader_known_by_the_jobs_line(srv, tmp_path):
    """accelerator.prepare builds a loader of its own from the job's (and iterates only that one): one
    loader, at the job's line, whose use is train (said again with the copy's details); each step
    counts its own batch, not the one accelerate fetches ahead."""
    pytest.importorskip("accelerate")
    job = tmp_path / "accel_job.py"
    job.write_text(PRELUDE + """
from accelerate import Accelerator
acc = Accelerator(cpu=True)
mine = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8, num_workers=0)
model, opt, prepared = acc.prepare(model, opt, mine)
for (x,) in prepared:
    opt.zero_grad(); acc.backward(model(x).pow(2).mean()); opt.step()
""")
    out = run_attached("import runpy; runpy.run_path(%r, run_name='__main__')" % str(job), srv, timeout=180)
    assert out.returncode == 0, out.stderr
    built = events(srv, "loader")
    mine = [b for b in built if b["dataset_len"] == 32]
    assert {b["loader"] for b in mine} == {mine[0]["loader"]} and len(mine) == 2, built
    assert all(b["where"].endswith("accel_job.py:%d" % (PRELUDE.count("\n") + 4)) for b in mine), mine
    assert {(u["loader"], u["use"]) for u in events(srv, "loader_use")} >= {(mine[0]["loader"], "train")}
    assert [s["samples"] for s in srv.messages("step")] == [8, 8, 8, 8]
