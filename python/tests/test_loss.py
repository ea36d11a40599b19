"""The loss of an unmodified job, seen by the attach at backward() and read without waiting."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import schema_check  # noqa: E402
from test_attach import PRELUDE, run, steps_of  # noqa: E402

from brim import _loss  # noqa: E402
from brim._timing import PendingSteps  # noqa: E402


def _needs(module: str) -> None:
    """Skip unless ``module`` is installed for the jobs' interpreter (asked of a fresh one: other tests
    put stand-ins in sys.modules). Found, not imported: an import of transformers or lightning is
    seconds of CPU, and the job imports it anyway."""
    found = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    if subprocess.run([sys.executable, "-c", found], capture_output=True).returncode != 0:
        pytest.skip(f"{module} is not installed for {sys.executable}")


PRINT = """
import json
def said(v):
    print("LOSS " + json.dumps(float(v)), flush=True)
"""


def said(out):
    return [json.loads(line[5:]) for line in out.stdout.splitlines() if line.startswith("LOSS ")]


def test_brim_loss_0_leaves_the_loss_alone(srv):
    out = run(PRELUDE + """
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for _ in range(5):
    loss = model(torch.randn(6, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
""", srv, env_extra={"BRIM_LOSS": "0"})
    assert out.returncode == 0, out.stderr
    steps = steps_of(srv)
    assert len(steps) == 5
    assert [s["loss"] for s in steps] == [None] * 5


def test_a_plain_loop_records_the_loss_it_computed(srv, channel_schema):
    out = run(PRELUDE + PRINT + """
from torch.utils.data import DataLoader, TensorDataset
opt = torch.optim.AdamW(model.parameters(), lr=0.05)
for (x,) in DataLoader(TensorDataset(torch.randn(48, 4)), batch_size=6):
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    said(loss)
""", srv)
    assert out.returncode == 0, out.stderr
    steps = steps_of(srv)
    assert len(steps) == 8
    assert [s["loss"] for s in steps] == pytest.approx(said(out), rel=1e-6)
    assert said(out)[0] != pytest.approx(said(out)[-1])  # it trained: the values are each step's own
    for m in srv.messages():
        schema_check.check(m, channel_schema)


def test_accumulation_sums_the_divided_losses_and_a_gradient_backward_is_no_loss(srv):
    out = run(PRELUDE + PRINT + """
opt = torch.optim.SGD(model.parameters(), lr=0.1)
total = 0.0
for i in range(6):
    loss = batch() / 2   # divided by the accumulation, as the frameworks do
    loss.backward()
    total += loss.item()
    if i % 2 == 1:
        said(total); total = 0.0; opt.step(); opt.zero_grad()
y = model(torch.randn(3, 4))
y.backward(torch.ones_like(y)); opt.step()   # a vector going backward with its gradient
""", srv)
    assert out.returncode == 0, out.stderr
    steps = steps_of(srv)
    assert [s["loss"] for s in steps[:3]] == pytest.approx(said(out), rel=1e-6)
    assert steps[3]["loss"] is None


def test_a_loop_without_optimizer_and_a_nan_loss(srv):
    out = run(PRELUDE + PRINT + """
for i in range(3):
    model.zero_grad(); loss = batch(); loss.backward(); said(loss)
    with torch.no_grad():
        for p in model.parameters(): p -= 0.1 * p.grad
loss = batch() * float("nan"); loss.backward()
""", srv)
    assert out.returncode == 0, out.stderr
    steps = steps_of(srv)
    assert [s["trigger"] for s in steps] == ["backward"] * 4
    assert [s["loss"] for s in steps[:3]] == pytest.approx(said(out), rel=1e-6)
    assert steps[3]["loss"] == "nan"  # the channel's word for a non-finite loss


@pytest.mark.skipif(not hasattr(getattr(torch, "amp", None), "GradScaler"), reason="torch.amp.GradScaler: torch 2.3+")
def test_the_loss_is_recorded_before_the_grad_scaler_scales_it(srv):
    out = run(PRELUDE + PRINT + """
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
for i in range(4):
    loss = batch()
    opt.zero_grad(); scaler.scale(loss).backward(); scaler.step(opt); scaler.update(); said(loss)
""", srv)
    assert out.returncode == 0, out.stderr
    assert [s["loss"] for s in steps_of(srv)] == pytest.approx(said(out), rel=1e-6)


class Event:
    def __init__(self):
        self.done = False
        self.waited = False

    def query(self):
        return self.done

    def synchronize(self):
        self.waited = True
        self.done = True


def test_a_device_loss_holds_its_step_until_the_copy_is_done_and_never_waits_before_exit():
    pending = PendingSteps()
    first, second = Event(), Event()
    pending.push({"step": 0}, None, 0.1, _loss.Read(event=first, buffer=torch.tensor(2.5)))
    pending.push({"step": 1}, None, 0.1, _loss.Read(event=second, buffer=torch.tensor(1.5)))
    assert pending.ready() == []  # the first copy is not done: nothing goes out, nothing waited
    second.done = True
    assert pending.ready() == [] and not first.waited  # in order: the second waits for the first
    first.done = True
    out = pending.ready()
    assert [(m["step"], m["loss"]) for m in out] == [(0, 2.5), (1, 1.5)]
    assert not first.waited and not second.waited
    third = Event()
    pending.push({"step": 2}, None, 0.1, _loss.Read(event=third, buffer=torch.tensor(0.5)))
    assert pending.ready(block=True)[0]["loss"] == 0.5 and third.waited  # at exit: waits for the last


def test_only_cpu_and_cuda_losses_are_read():
    _loss.reset()
    _loss.seen(torch.tensor(3.0))
    read = _loss.take()
    assert read is not None and read.ready() and read.value() == 3.0
    assert _loss.take() is None  # taken once
    _loss.seen(torch.ones(2))
    assert _loss.take() is None  # not a scalar: not a loss
    meta = torch.empty((), device="meta")
    _loss.seen(meta)
    assert _loss.take() is None  # another device: reading would make it finish its work


# the Hugging Face Trainer's own logged loss with accumulation is asserted on the Trainer run of
# test_model_facts.py (test_the_hugging_face_trainer_passes_num_items_in_batch_..., [False]): one
# transformers process less


def test_lightning_s_own_logged_train_loss(srv):
    _needs("lightning")
    out = run("""
import json, torch, lightning as L
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0); torch.set_num_threads(1)
class M(L.LightningModule):
    def __init__(self):
        super().__init__(); self.net = torch.nn.Linear(8, 3)
    def training_step(self, batch, i):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss
    def on_train_batch_end(self, outputs, batch, i):
        print("LOSS " + json.dumps(float(self.trainer.callback_metrics["train_loss"])), flush=True)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.5)
data = DataLoader(TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,))), batch_size=8)
L.Trainer(max_steps=6, logger=False, enable_checkpointing=False, enable_progress_bar=False,
          enable_model_summary=False, accelerator="cpu").fit(M(), data)
""", srv, timeout=180)
    assert out.returncode == 0, out.stderr
    steps = steps_of(srv)
    assert len(steps) == 6
    assert [s["loss"] for s in steps] == pytest.approx(said(out), rel=1e-5)
